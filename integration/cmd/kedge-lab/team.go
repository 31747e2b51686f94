package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kedge.dev/kedge/integration/srcroot"
	"kedge.dev/kedge/integration/teamlab"
)

// runTeam is `make team`: the lab's hosts with the team install of
// docker-compose.yml (Temporal on PostgreSQL with mutual TLS, Web UI,
// codec server, two workers, the webhook) run as local processes, in
// place of `kedge dev`. It writes DIR/team.env for the operator's shell.
func runTeam(ctx context.Context, dir string, served []string) error {
	repo, err := srcroot.Dir()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	teamDir := filepath.Join(dir, "team")
	// A fresh install each time, as the lab's hosts are.
	if err := os.RemoveAll(teamDir); err != nil {
		return err
	}
	fmt.Println("starting the team install (docker-compose.yml's services, without Docker)...")
	t, err := teamlab.Start(ctx, teamlab.Options{
		Repo: repo, Dir: teamDir, Kedge: filepath.Join(filepath.Dir(self), "kedge"), Net: "127.0.12",
		Scale:    map[string]int{"kedge-worker": 2},
		Progress: func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) },
		Setup:    func(kedgeDir string) error { return teamSetup(kedgeDir, served) },
	})
	if err != nil {
		return err
	}
	defer t.Close()
	kd := t.KedgeDir()
	env := fmt.Sprintf(`TEMPORAL_ADDRESS=%s
TEMPORAL_TLS_CLIENT_CERT_PATH=%s
TEMPORAL_TLS_CLIENT_KEY_PATH=%s
TEMPORAL_TLS_SERVER_CA_CERT_PATH=%s
TEMPORAL_TLS_SERVER_NAME=temporal
KEDGE_CODEC_KEY=%s
KEDGE_UI_URL=%s
`, t.Address(), filepath.Join(kd, "tls", "operator.pem"), filepath.Join(kd, "tls", "operator.key"),
		filepath.Join(kd, "tls", "ca.pem"), filepath.Join(kd, "codec.key"), t.UIURL())
	envFile := filepath.Join(dir, "team.env")
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		return err
	}
	inv := filepath.Join(kd, "clusters", filepath.Base(served[0]))
	fmt.Printf("\nthe team install is up: Temporal %s on PostgreSQL %s, two workers, webhook on %s:8235\n", t.Address(), t.Postgres().Address(), t.IP("kedge-webhook"))
	fmt.Printf("logs: %s\n", filepath.Join(teamDir, "logs"))
	fmt.Printf("try:  set -a; . %s; set +a\n", envFile)
	fmt.Printf("      bin/kedge run kubelet-image-swap --inventory %s --set image=quay.io/poseidon/kubelet:v1.35.4 --set approveControllers=false --wait\n", inv)
	fmt.Printf("then open %s (Web UI; payloads decoded by the codec server)\n\n", t.UIURL())
	<-ctx.Done()
	fmt.Println("stopping the team install...")
	return nil
}

// teamSetup fills the operator's directory: the inventories the workers
// serve and a webhook config allowing one Slack user everything.
func teamSetup(kedgeDir string, served []string) error {
	for _, d := range []string{"clusters", "webhook"} {
		if err := os.MkdirAll(filepath.Join(kedgeDir, d), 0o700); err != nil {
			return err
		}
	}
	var clusters strings.Builder
	for _, inv := range served {
		data, err := os.ReadFile(inv)
		if err != nil {
			return err
		}
		name := filepath.Base(inv)
		if err := os.WriteFile(filepath.Join(kedgeDir, "clusters", name), data, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&clusters, "  %s: {inventory: ../clusters/%s}\n", strings.TrimSuffix(name, filepath.Ext(name)), name)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	if err := os.WriteFile(filepath.Join(kedgeDir, "webhook", "slack-signing-secret"), []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(kedgeDir, "webhook", "webhook.yaml"), []byte("apiVersion: kedge/v1\nkind: ChatOps\nclusters:\n"+clusters.String()+
		"allow:\n  - name: lab\n    slackUsers: [U0LAB]\n    clusters: [\"*\"]\n    start: [\"*\"]\n    approve: [\"*\"]\n"), 0o600)
}
