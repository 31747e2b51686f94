package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// The first stage of a CA rotation, on the real Vault: vault.stage-ca
// makes the new CA as a second issuer of the PKI mount, beside the one in
// use. Both sign (a leaf from each chains to its own CA and not to the
// other), the bundle trusts both, the CA in use is untouched, the new
// CA's key never reaches Temporal in plain text, and a second run returns
// the same new CA without making another.
func TestStageCABesideTheOneInUse(t *testing.T) {
	mainLane.join(t)
	v, tokenFile := labVault(t)
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	body := labInventory(world.lab, world.lab.KnownHostsFile) + fmt.Sprintf(
		"vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n",
		v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	path := "kedge/it/rotation-" + randomHex(t, 4) + "/ca"
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: stage-a-ca}
steps:
  - id: ca
    action: vault.cluster-ca
    with: {path: `+path+`, commonName: "it kubernetes CA"}
  - id: stage
    needs: [ca]
    action: vault.stage-ca
    with: {path: `+path+`, commonName: "it kubernetes CA 2", ttl: 240h}
  - id: oldleaf
    needs: [stage]
    action: vault.issue-cert
    with: {commonName: "system:node:worker-1", ttl: 1h, issuer: "${ steps.stage.outputs.oldIssuer }"}
  - id: newleaf
    needs: [stage]
    action: vault.issue-cert
    with: {commonName: "system:node:worker-1", ttl: 1h, issuer: "${ steps.stage.outputs.issuer }"}
  - id: write
    needs: [oldleaf, newleaf]
    action: host.write-file
    on: worker-1
    with:
      path: /etc/kedge-rotation/leaves.pem
      mode: "0644"
      content: |
        ${ steps.oldleaf.outputs.certificate }
        ${ steps.newleaf.outputs.certificate }
        ${ steps.stage.outputs.bundle }
`)
	issuers := func() int {
		s, err := v.Client.Logical().ListWithContext(t.Context(), vaultlab.PKIPath+"/issuers")
		if err != nil || s == nil {
			t.Fatalf("list issuers: %v", err)
		}
		keys, _ := s.Data["keys"].([]any)
		return len(keys)
	}
	defaultIssuer := func() any {
		s, err := v.Client.Logical().ReadWithContext(t.Context(), vaultlab.PKIPath+"/config/issuers")
		if err != nil || s == nil {
			t.Fatalf("read the default issuer: %v", err)
		}
		return s.Data["default"]
	}
	before, defaultBefore := issuers(), defaultIssuer()
	p, code, errOut := runWaitInv(t, rb, inv)
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("exit %d: %+v\n%s", code, p, errOut)
	}
	if n := issuers(); n != before+2 {
		t.Errorf("issuers: %d before, %d after; want the CA in use and its successor", before, n)
	}
	if d := defaultIssuer(); d != defaultBefore {
		t.Errorf("the mount's default issuer changed from %v to %v: certificates issued without an issuer would come from another CA", defaultBefore, d)
	}
	kv := v.Client.KVv2(vaultlab.KVPath)
	inUse, err := kv.Get(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	next, err := kv.Get(t.Context(), path+"-next")
	if err != nil {
		t.Fatal(err)
	}
	oldCA, newCA := parseCert(t, inUse.Data["certificate"].(string)), parseCert(t, next.Data["certificate"].(string))
	if next.Data["replaces"] != inUse.Data["issuer"] || next.Data["issuer"] == inUse.Data["issuer"] || newCA.Subject.CommonName != "it kubernetes CA 2" {
		t.Errorf("the staged CA's record: %v (in use: issuer %v)", next.Data, inUse.Data["issuer"])
	}

	data, err := labHost(t, "worker-1").ReadFile("/etc/kedge-rotation/leaves.pem")
	if err != nil {
		t.Fatal(err)
	}
	certs := parseCerts(t, data)
	if len(certs) < 4 {
		t.Fatalf("%d certificates written", len(certs))
	}
	oldLeaf, newLeaf, bundle := certs[0], certs[1], certs[len(certs)-2:]
	if !bundle[0].Equal(oldCA) || !bundle[1].Equal(newCA) {
		t.Errorf("the bundle is not the CA in use, then the new one: %s, %s", bundle[0].Subject, bundle[1].Subject)
	}
	pool := func(cas ...*x509.Certificate) x509.VerifyOptions {
		p := x509.NewCertPool()
		for _, c := range cas {
			p.AddCert(c)
		}
		return x509.VerifyOptions{Roots: p, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	}
	for _, c := range []struct {
		what  string
		leaf  *x509.Certificate
		roots []*x509.Certificate
		ok    bool
	}{
		{"the old leaf by the CA in use", oldLeaf, []*x509.Certificate{oldCA}, true},
		{"the old leaf by the new CA", oldLeaf, []*x509.Certificate{newCA}, false},
		{"the new leaf by the new CA", newLeaf, []*x509.Certificate{newCA}, true},
		{"the new leaf by the CA in use", newLeaf, []*x509.Certificate{oldCA}, false},
		{"the old leaf by the bundle", oldLeaf, bundle, true},
		{"the new leaf by the bundle", newLeaf, bundle, true},
	} {
		if _, err := c.leaf.Verify(pool(c.roots...)); (err == nil) != c.ok {
			t.Errorf("%s: verify gave %v, want ok=%t", c.what, err, c.ok)
		}
	}
	key, _ := next.Data["privateKey"].(string)
	if key == "" || bytes.Contains(storedHistory(t, p.WorkflowID), []byte(strings.TrimSpace(key))) {
		t.Error("the new CA's key is missing, or in Temporal's history in plain text")
	}

	// Resumed or run again: the same new CA, no other issuer.
	if p, code, errOut := runWaitInv(t, rb, inv); code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("again: exit %d: %+v\n%s", code, p, errOut)
	}
	again, err := kv.Get(t.Context(), path+"-next")
	if err != nil || again.Data["issuer"] != next.Data["issuer"] {
		t.Errorf("a second stage made another CA: %v (%v)", again.Data["issuer"], err)
	}
	if n := issuers(); n != before+2 {
		t.Errorf("issuers after a second run: %d, want %d", n, before+2)
	}
	_, _ = labHost(t, "worker-1").Exec(t.Context(), "rm", "-rf", "/etc/kedge-rotation")
}

func parseCert(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	certs := parseCerts(t, []byte(s))
	if len(certs) != 1 {
		t.Fatalf("want one certificate, got %d", len(certs))
	}
	return certs[0]
}

func parseCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// vaultInventory is the world's inventory with the lab Vault.
func vaultInventory(t *testing.T) (*vaultlab.Vault, string) {
	t.Helper()
	v, tokenFile := labVault(t)
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	body := labInventory(world.lab, world.lab.KnownHostsFile) + fmt.Sprintf(
		"vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n",
		v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return v, inv
}

// The last stage of a rotation in the real Vault: vault.promote-ca makes
// the staged CA the one in use at PATH, keeps the old at PATH-previous
// and deletes PATH-next; the old issuer, the mount's default, hands that
// over, so a certificate issued without naming an issuer comes from the
// new CA; run again it changes nothing. The service-account key pair
// moves the same way. With nothing staged it is refused.
func TestPromoteCAMovesTheRecordsInVault(t *testing.T) {
	mainLane.join(t)
	v, inv := vaultInventory(t)
	base := "kedge/it/promote-" + randomHex(t, 4)
	ca, sa := base+"/ca", base+"/service-account"
	stage := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: stage-to-promote}
steps:
  - id: ca
    action: vault.cluster-ca
    with: {path: `+ca+`, commonName: "it promoted CA"}
  - id: stage
    needs: [ca]
    action: vault.stage-ca
    with: {path: `+ca+`, commonName: "it promoted CA 2", ttl: 240h}
  - id: sa
    action: vault.key-pair
    with: {path: `+sa+`}
  - id: sa-next
    needs: [sa]
    action: vault.key-pair
    with: {path: `+sa+`-next}
`)
	if p, code, errOut := runWaitInv(t, stage, inv); code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("stage: exit %d: %+v\n%s", code, p, errOut)
	}
	kv := v.Client.KVv2(vaultlab.KVPath)
	read := func(path string) map[string]any {
		s, err := kv.Get(t.Context(), path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		return s.Data
	}
	oldCA, nextCA, oldSA, nextSA := read(ca), read(ca+"-next"), read(sa), read(sa+"-next")

	// The CA in use is the mount's default issuer (put back after).
	issuers := vaultlab.PKIPath + "/config/issuers"
	def, err := v.Client.Logical().ReadWithContext(t.Context(), issuers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = v.Client.Logical().WriteWithContext(context.Background(), issuers, map[string]any{"default": def.Data["default"]})
	})
	if _, err := v.Client.Logical().WriteWithContext(t.Context(), issuers, map[string]any{"default": oldCA["issuer"]}); err != nil {
		t.Fatal(err)
	}

	promote := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: promote}
steps:
  - id: promote
    action: vault.promote-ca
    with: {path: `+ca+`}
  - id: again
    needs: [promote]
    action: vault.promote-ca
    with: {path: `+ca+`}
  - id: sa
    action: vault.promote-ca
    with: {path: `+sa+`}
  - id: outputs
    needs: [again, sa]
    action: kedge.check
    with:
      that: "${ steps.promote.outputs.changed && steps.promote.outputs.defaultIssuer && steps.promote.outputs.issuer == '`+nextCA["issuer"].(string)+`' && steps.promote.outputs.previousIssuer == '`+oldCA["issuer"].(string)+`' && !steps.again.outputs.changed && !steps.again.outputs.defaultIssuer && steps.again.outputs.issuer == steps.promote.outputs.issuer && steps.sa.outputs.changed && steps.sa.outputs.issuer == '' }"
      message: the promotions' outputs
`)
	if p, code, errOut := runWaitInv(t, promote, inv); code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("promote: exit %d: %+v\n%s", code, p, errOut)
	}
	inUse, previous := read(ca), read(ca+"-previous")
	if inUse["issuer"] != nextCA["issuer"] || inUse["certificate"] != nextCA["certificate"] || inUse["privateKey"] != nextCA["privateKey"] || inUse["replaces"] != oldCA["issuer"] {
		t.Errorf("in use after the promotion: issuer %v, replaces %v", inUse["issuer"], inUse["replaces"])
	}
	if previous["issuer"] != oldCA["issuer"] || previous["privateKey"] != oldCA["privateKey"] || previous["promotedAt"] == nil {
		t.Errorf("kept as previous: issuer %v, promotedAt %v", previous["issuer"], previous["promotedAt"])
	}
	for _, p := range []string{ca + "-next", sa + "-next"} {
		if _, err := kv.Get(t.Context(), p); !errors.Is(err, vaultapi.ErrSecretNotFound) {
			t.Errorf("%s after the promotion: %v", p, err)
		}
	}
	if read(sa)["publicKey"] != nextSA["publicKey"] || read(sa + "-previous")["publicKey"] != oldSA["publicKey"] {
		t.Error("the service-account key pair did not move")
	}
	// The old issuer is kept; the default is the new one, so a
	// certificate that names no issuer comes from the new CA.
	if s, err := v.Client.Logical().ReadWithContext(t.Context(), vaultlab.PKIPath+"/issuer/"+oldCA["issuer"].(string)); err != nil || s == nil {
		t.Errorf("the old issuer is gone: %v", err)
	}
	leaf, err := v.Client.Logical().WriteWithContext(t.Context(), vaultlab.PKIPath+"/issue/"+vaultlab.PKIRole, map[string]any{"common_name": "it-default", "ttl": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(t, nextCA["certificate"].(string)))
	if _, err := parseCert(t, leaf.Data["certificate"].(string)).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("a certificate issued by the default issuer does not chain to the new CA: %v", err)
	}

	// Nothing staged, nothing promoted: refused.
	nothing := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: promote-nothing}
steps:
  - id: ca
    action: vault.cluster-ca
    with: {path: `+base+`/other-ca, commonName: "it unstaged CA"}
  - id: promote
    needs: [ca]
    action: vault.promote-ca
    with: {path: `+base+`/other-ca}
`)
	p, code, _ := runWaitInv(t, nothing, inv)
	if s := step(t, p, "promote"); code == 0 || !strings.Contains(s.LastError, "NotStaged") && !strings.Contains(s.LastError, "stage one first") {
		t.Errorf("promote with nothing staged: exit %d, %s", code, s.LastError)
	}
}

// startTLSEtcd starts a one-member etcd on loopback serving a certificate
// from the Vault issuer given and trusting caPEM for its clients, as a
// cluster's etcd does (client certificates required), and returns its
// host:port once it presents its certificate.
func startTLSEtcd(t *testing.T, v *vaultlab.Vault, issuer, caPEM string) string {
	t.Helper()
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	issued, err := v.Client.Logical().WriteWithContext(t.Context(), vaultlab.PKIPath+"/issuer/"+issuer+"/issue/"+vaultlab.PKIRole,
		map[string]any{"common_name": "it-etcd", "ip_sans": "127.0.0.1", "ttl": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{"server.crt": issued.Data["certificate"].(string), "server.key": issued.Data["private_key"].(string), "ca.crt": caPEM}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	client, peer := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(tools, "etcd"), "--name=it-etcd", "--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls=https://"+client, "--advertise-client-urls=https://"+client,
		"--cert-file="+filepath.Join(dir, "server.crt"), "--key-file="+filepath.Join(dir, "server.key"),
		"--trusted-ca-file="+filepath.Join(dir, "ca.crt"), "--client-cert-auth",
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=it-etcd="+peer,
		"--log-level=warn", "--unsafe-no-fsync")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	// Ready when it presents its certificate (it then refuses this
	// client, which has none).
	deadline := time.Now().Add(time.Minute)
	for {
		presented := false
		cfg := &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			presented = len(raw) > 0
			return nil
		}}
		if c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", client, cfg); err == nil {
			c.Close()
		}
		if presented {
			return client
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("etcd exited:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd at %s presented no certificate within a minute", client)
		}
	}
}

// A CA rotation's gates against a real etcd (one member, client
// certificates required, its certificate from etcd's CA in the real
// Vault): etcd.health reaches it with a client certificate from that CA's
// issuer and reports the member as leader; certinfo.scan-ca reads the
// certificate it presents though it refuses the scan's client, and names
// the CA in use. Expecting three members, the health check is refused;
// refusing the CA in use, the scan is, naming the endpoint.
func TestEtcdHealthAndScanCAOnARealEtcd(t *testing.T) {
	mainLane.join(t)
	v, inv := vaultInventory(t)
	path := "kedge/it/etcd-gates-" + randomHex(t, 4) + "/etcd-ca"
	stage := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: stage-etcd-ca}
steps:
  - id: ca
    action: vault.cluster-ca
    with: {path: `+path+`, commonName: "it etcd CA", keyInVault: true}
  - id: stage
    needs: [ca]
    action: vault.stage-ca
    with: {path: `+path+`, commonName: "it etcd CA 2", keyInVault: true, ttl: 240h}
`)
	if p, code, errOut := runWaitInv(t, stage, inv); code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("stage: exit %d: %+v\n%s", code, p, errOut)
	}
	kv := v.Client.KVv2(vaultlab.KVPath)
	inUse, err := kv.Get(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	next, err := kv.Get(t.Context(), path+"-next")
	if err != nil {
		t.Fatal(err)
	}
	issuer := inUse.Data["issuer"].(string)
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.pem"), filepath.Join(dir, "new.pem")
	for f, c := range map[string]any{oldFile: inUse.Data["certificate"], newFile: next.Data["certificate"]} {
		if err := os.WriteFile(f, []byte(c.(string)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	endpoint := startTLSEtcd(t, v, issuer, inUse.Data["certificate"].(string))

	gates := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: etcd-gates}
params:
  oldCA: {type: string, required: true}
  newCA: {type: string, required: true}
  issuer: {type: string, required: true}
  expectMembers: {type: int, default: 1}
  refuse: {type: list, default: []}
steps:
  - id: health
    action: etcd.health
    with: {endpoints: ["https://`+endpoint+`"], caCert: "${ params.oldCA }", issuer: "${ params.issuer }", expectMembers: "${ params.expectMembers }"}
  - id: scan
    needs: [health]
    action: certinfo.scan-ca
    with:
      endpoints: ["`+endpoint+`"]
      cas: [{name: old, certificate: "${ params.oldCA }"}, {name: new, certificate: "${ params.newCA }"}]
      refuse: ${ params.refuse }
  - id: outputs
    needs: [scan]
    action: kedge.check
    with:
      that: "${ steps.health.outputs.leader == 'it-etcd' && size(steps.health.outputs.members) == 1 && steps.health.outputs.members[0].leader && steps.health.outputs.members[0].endpoint == 'https://`+endpoint+`' && steps.health.outputs.members[0].raftIndex > 0 && steps.health.outputs.members[0].version.startsWith('3.6.') && steps.scan.outputs.presenting.old == ['`+endpoint+`'] && size(steps.scan.outputs.presenting.new) == 0 && steps.scan.outputs.endpoints[0].ca == 'old' && steps.scan.outputs.endpoints[0].subject == 'CN=it-etcd' }"
      message: the gates' outputs
`)
	args := []string{"--set-file", "oldCA=" + oldFile, "--set-file", "newCA=" + newFile, "--set", "issuer=" + issuer}
	if p, code, errOut := runWaitInv(t, gates, inv, args...); code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("gates: exit %d: %+v\n%s", code, p, errOut)
	}
	p, code, _ := runWaitInv(t, gates, inv, append(args, "--set", "expectMembers=3")...)
	if s := step(t, p, "health"); code == 0 || !strings.Contains(s.LastError, "etcd has 1 members (it-etcd), not 3") || s.Attempts != 1 {
		t.Errorf("three members expected: exit %d, %d attempts: %s", code, s.Attempts, s.LastError)
	}
	p, code, _ = runWaitInv(t, gates, inv, append(args, "--set", "refuse=old")...)
	if s := step(t, p, "scan"); code == 0 || !strings.Contains(s.LastError, endpoint+` presents "CN=it-etcd" issued by "CN=it etcd CA"`) || s.Attempts != 1 {
		t.Errorf("the CA in use refused: exit %d, %d attempts: %s", code, s.Attempts, s.LastError)
	}
}
