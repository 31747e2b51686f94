package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/workflows"
)

// recordingAPIServer is an API server of the key holder's choosing: it
// notes each request's Authorization header and answers get-node for
// any node.
type recordingAPIServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newRecordingAPIServer(t *testing.T) *recordingAPIServer {
	t.Helper()
	s := &recordingAPIServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		name := strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")
		fmt.Fprintf(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":%q},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, name)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *recordingAPIServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

func (s *recordingAPIServer) caData() string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// adminCertData is a client certificate and key, base64 of PEM, as a
// kubeconfig embeds them.
func adminCertData(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kedge-admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return b("CERTIFICATE", der), b("PRIVATE KEY", kd)
}

// A codec key holder runs kube.save-kubeconfig with a kubeconfig of
// their own at the worker's own kubeconfig path (so the path check
// passes), then kube actions that load it. Before, the worker ran its
// exec plugin as root, sent a worker secret named by tokenFile as a
// bearer token to the caller's server, handed back the worker's SSH
// private key as kube.cluster-info's caCert, and sent every later kube
// action of the cluster to the caller's server. Now each is refused at
// the save, once, as CredentialRefused with an audit line; nothing runs,
// nothing is sent, and the same runbook with what bootstrap saves works.
func TestAKeyHolderCannotPlantAKubeconfig(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "vault-token")
	if err := os.WriteFile(token, []byte("s.the-workers-vault-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "the-plugin-ran")
	const exfil = "/tmp/kedge-planted-ca"
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", exfil)

	// The cluster's API server as the worker's inventory names it, and
	// another the caller would rather the worker used.
	api, elsewhere := newRecordingAPIServer(t), newRecordingAPIServer(t)
	kubeconfig := filepath.Join(dir, "kube", "admin.conf")
	inv := filepath.Join(dir, "planted.yaml")
	text := strings.Replace(lab.Inventory("planted", world.lab, world.lab.KnownHostsFile), "controllers:\n",
		"kubernetes:\n  kubeconfig: "+kubeconfig+"\n  server: "+api.URL+"\ncontrollers:\n", 1)
	if err := os.WriteFile(inv, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	workerServes(inv) // the key holder uses the worker's own inventory

	cert, key := adminCertData(t)
	certs := "    client-certificate-data: " + cert + "\n    client-key-data: " + key
	planted := func(server, cluster, user string) string {
		return fmt.Sprintf(`apiVersion: kedge/v1
kind: Runbook
metadata: {name: plant-a-kubeconfig}
steps:
  - id: plant
    action: kube.save-kubeconfig
    retry: {maxAttempts: 1}
    with:
      content: |
        apiVersion: v1
        kind: Config
        clusters:
        - name: c
          cluster:
            server: %s
%s
        users:
        - name: u
          user:
%s
        contexts:
        - name: ctx
          context: {cluster: c, user: u}
        current-context: ctx
  - id: node
    needs: [plant]
    action: kube.get-node
    on: worker-1
    retry: {maxAttempts: 1}
  - id: info
    needs: [plant]
    action: kube.cluster-info
    retry: {maxAttempts: 1}
  - id: take
    needs: [info]
    action: host.write-file
    on: worker-1
    with: {path: %s, content: "${ steps.info.outputs.caCert }", mode: "0644"}
`, server, indent(cluster, 8), indent(user, 8), exfil)
	}
	ca := "    certificate-authority-data: " + api.caData()
	for _, c := range []struct {
		name, runbook, want string
	}{
		{"an exec plugin", planted(api.URL, ca, fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: /bin/sh
      args: ["-c", "touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'"]`, marker)), "users[u].exec"},
		{"a worker secret as tokenFile", planted(api.URL, ca, "    tokenFile: "+token), "users[u].tokenFile"},
		{"the worker's SSH key as its CA", planted(api.URL, "    certificate-authority: "+world.lab.IdentityFile, certs), "clusters[c].certificate-authority"},
		{"the caller's server", planted(elsewhere.URL, "    certificate-authority-data: "+elsewhere.caData(), certs), "is not this cluster's API server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(api.requests())
			p, id := runAsKeyHolder(t, writeRunbook(t, c.runbook), inv)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the exec plugin ran on the worker")
				_ = os.Remove(marker)
			}
			for _, auth := range api.requests()[before:] {
				if strings.Contains(auth, "s.the-workers-vault-token") {
					t.Errorf("the worker's Vault token reached the API server as %q", auth)
				}
			}
			if data, err := labHost(t, "worker-1").ReadFile(exfil); err == nil && strings.Contains(string(data), "PRIVATE KEY") {
				t.Errorf("kube.cluster-info handed the worker's SSH private key to the run")
				_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", exfil)
			}
			if n := len(elsewhere.requests()); n != 0 {
				t.Errorf("kube actions went to the caller's server (%d requests)", n)
			}
			if p.State != workflows.StateFailed {
				t.Fatalf("the run was not refused: %s", p.State)
			}
			if s := step(t, p, "plant"); s.Attempts != 1 || !strings.Contains(s.LastError, c.want) {
				t.Errorf("plant: %d attempts, %q; want one attempt refused over %s", s.Attempts, s.LastError, c.want)
			}
			if log := world.workerLog.String(); !strings.Contains(log, "action refused") || !strings.Contains(log, id) {
				t.Errorf("no audit line for %s in the worker's log", id)
			}
		})
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("refused kubeconfigs reached the API server (%d requests)", n)
	}
	if _, err := os.Stat(kubeconfig); err == nil {
		t.Error("a refused kubeconfig was saved")
	}

	// What bootstrap saves (embedded certificates for the inventory's
	// server) is saved, and the kube actions that follow reach it.
	p, _ := runAsKeyHolder(t, writeRunbook(t, planted(api.URL, ca, certs)), inv)
	if p.State != workflows.StateSucceeded {
		t.Fatalf("the bootstrap's kind of kubeconfig: %+v", p)
	}
	if n := len(api.requests()); n == 0 {
		t.Error("get-node did not reach the inventory's API server")
	}
	if got := readHostFile(t, "worker-1", exfil); !strings.Contains(got, "BEGIN CERTIFICATE") {
		t.Errorf("cluster-info's caCert: %q", got)
	}
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-f", exfil)
}

// indent puts n spaces before every line of s.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}
