package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"golang.org/x/crypto/ssh"
	"google.golang.org/protobuf/proto"

	"kedge.dev/kedge/integration/sshtest"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

var vaultWorld struct {
	once      sync.Once
	v         *vaultlab.Vault
	tokenFile string
	err       error
}

// labVault starts (once) the world's Vault and returns it with a file
// holding its token, as an operator's worker would have it.
func labVault(t testing.TB) (*vaultlab.Vault, string) {
	t.Helper()
	vaultWorld.once.Do(func() {
		dir := filepath.Join(world.dir, "vault")
		vaultWorld.v, vaultWorld.err = vaultlab.Start(context.Background(), vaultlab.Options{Dir: dir})
		if vaultWorld.err != nil {
			return
		}
		atWorldEnd(vaultWorld.v.Stop)
		vaultWorld.tokenFile = filepath.Join(dir, "token")
		vaultWorld.err = os.WriteFile(vaultWorld.tokenFile, []byte(vaultWorld.v.Token+"\n"), 0o600)
	})
	if vaultWorld.err != nil {
		t.Fatal(vaultWorld.err)
	}
	return vaultWorld.v, vaultWorld.tokenFile
}

// storedHistory is a run's history exactly as Temporal stores it, in the
// protobuf wire form: payload data appears as raw bytes, so a payload that
// was not sealed shows its content in plain text.
func storedHistory(t *testing.T, id string) []byte {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := world.client.GetWorkflowHistory(t.Context(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, e)
	}
	data, err := proto.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func hostStat(t *testing.T, h *testhosts.Host, path string) string {
	t.Helper()
	out, err := h.Exec(t.Context(), "stat", "-c", "%a %U", path)
	if err != nil {
		t.Fatalf("stat %s on %s: %v", path, h.Name, err)
	}
	return strings.TrimSpace(string(out))
}

// A runbook issues a certificate from Vault's PKI, writes it and its key
// onto a host, and reads a KV secret; neither the key, nor the token, nor
// the secret reaches Temporal in plain text.
func TestIssueCertFromVaultOntoAHost(t *testing.T) {
	mainLane.join(t)
	v, tokenFile := labVault(t)
	secret := "kedge-it-" + randomHex(t, 12)
	if _, err := v.Client.KVv2(vaultlab.KVPath).Put(t.Context(), "kedge/it/issue-cert", map[string]any{"password": secret}); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	body := labInventory(world.lab, world.lab.KnownHostsFile) + fmt.Sprintf(
		"vault:\n  address: %s\n  tokenFile: %s\n  pki: %s\n  role: %s\n  kv: %s\n",
		v.Address, tokenFile, vaultlab.PKIPath, vaultlab.PKIRole, vaultlab.KVPath)
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	h := labHost(t, "worker-1")
	rb := writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: vault-cert}
steps:
  - id: cert
    action: vault.issue-cert
    with:
      commonName: system:node:worker-1
      altNames: [worker-1]
      # An inventory's address and name as they come: each where it belongs.
      sans: [worker-1.lab.kedge.test, `+h.Address+`]
      ttl: 2h
  - id: write-cert
    needs: [cert]
    action: host.write-file
    on: worker-1
    with: {path: /etc/kedge-vault/node.crt, content: "${ steps.cert.outputs.certificate }", mode: "0644"}
  - id: write-key
    needs: [cert]
    action: host.write-file
    on: worker-1
    with: {path: /etc/kedge-vault/node.key, content: "${ steps.cert.outputs.privateKey }", mode: "0600"}
  - id: secret
    action: vault.read-secret
    with: {path: kedge/it/issue-cert}
  - id: write-secret
    needs: [secret]
    action: host.write-file
    on: worker-1
    with: {path: /etc/kedge-vault/secret, content: "${ steps.secret.outputs.data.password }", mode: "0600"}
`)
	began := time.Now()
	p, code, errOut := runWaitInv(t, rb, inv)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%+v", code, errOut, p)
	}
	ended := time.Now()

	certPEM := readHostFile(t, "worker-1", "/etc/kedge-vault/node.crt")
	keyPEM := readHostFile(t, "worker-1", "/etc/kedge-vault/node.key")
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no PEM certificate on the host: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(v.CACertPEM) {
		t.Fatal("the lab CA holds no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("the certificate on the host does not verify against Vault's CA: %v", err)
	}
	if cert.Subject.CommonName != "system:node:worker-1" {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	dns := slices.Clone(cert.DNSNames)
	slices.Sort(dns)
	if !slices.Equal(dns, []string{"worker-1", "worker-1.lab.kedge.test"}) {
		t.Errorf("DNS SANs %v", cert.DNSNames)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP(h.Address)) {
		t.Errorf("IP SANs %v, want %s", cert.IPAddresses, h.Address)
	}
	if cert.NotAfter.Before(began.Add(2*time.Hour-time.Minute)) || cert.NotAfter.After(ended.Add(2*time.Hour+time.Minute)) {
		t.Errorf("valid until %s, want 2h after the run (%s)", cert.NotAfter, began)
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		t.Errorf("the key on the host does not match the certificate: %v", err)
	}
	if got := hostStat(t, h, "/etc/kedge-vault/node.key"); got != "600 root" {
		t.Errorf("key file mode and owner %q, want 600 root", got)
	}
	if got := hostStat(t, h, "/etc/kedge-vault/node.crt"); got != "644 root" {
		t.Errorf("certificate file mode and owner %q, want 644 root", got)
	}
	if got := readHostFile(t, "worker-1", "/etc/kedge-vault/secret"); got != secret {
		t.Errorf("secret on the host %q, want %q", got, secret)
	}
	if got := hostStat(t, h, "/etc/kedge-vault/secret"); got != "600 root" {
		t.Errorf("secret file mode and owner %q, want 600 root", got)
	}

	hist := storedHistory(t, p.WorkflowID)
	for what, plain := range map[string]string{
		"a private key":     "PRIVATE KEY",
		"the Vault token":   v.Token,
		"the secret":        secret,
		"the key's content": keyLine(t, keyPEM),
	} {
		if bytes.Contains(hist, []byte(plain)) {
			t.Errorf("the stored history holds %s in plain text", what)
		}
	}
	assertSealed(t, p.WorkflowID)
}

// keyLine is a line of the key's base64 body, long enough to be unique.
func keyLine(t *testing.T, keyPEM string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(keyPEM), "\n")
	if len(lines) < 3 || len(lines[1]) < 32 {
		t.Fatalf("unexpected key PEM layout: %d lines", len(lines))
	}
	return lines[1]
}

// vaultSSHInventory is an inventory of l's hosts that logs in with
// certificates from Vault's SSH CA (no identity file) and checks host keys
// against knownHosts.
func vaultSSHInventory(t *testing.T, l *testhosts.Lab, vaultAddr, tokenFile, role, knownHosts string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata: {name: vault-ssh}\nssh:\n  user: core\n  become: sudo\n  knownHostsFile: %s\n  vaultSigner: {role: %s}\n", knownHosts, role)
	fmt.Fprintf(&b, "vault:\n  address: %s\n  tokenFile: %s\nworkers:\n", vaultAddr, tokenFile)
	for _, h := range l.Hosts {
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", h.Name, h.Address)
	}
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// whoAmI writes who the login was onto the host, retrying up to three
// times so that a retried failure shows in the attempts.
func whoAmI(t *testing.T, on string) string {
	return writeRunbook(t, `
apiVersion: kedge/v1
kind: Runbook
metadata: {name: vault-ssh}
steps:
  - id: login
    action: host.run
    on: `+on+`
    retry: {maxAttempts: 3, initialInterval: 100ms}
    with: {command: 'echo "$SUDO_USER as $(id -un) via vault" > /var/lib/kedge-login'}
`)
}

// Kedge logs in with short-lived certificates signed by Vault's SSH CA;
// hosts are verified by their host certificates (@cert-authority). A role
// that may not sign for the user, or a host that does not trust the CA,
// fails the step at once as an authentication failure.
func TestSSHLoginWithVaultCertificate(t *testing.T) {
	mainLane.join(t)
	v, tokenFile := labVault(t)
	dir := t.TempDir()
	hostCA := sshtest.NewSigner(t)
	l, err := testhosts.Start(t.Context(), testhosts.Options{
		Count: 2, Names: []string{"vault-ssh-1", "vault-ssh-2"}, BaseIP: "127.0.40.", Dir: filepath.Join(dir, "hosts"),
		TrustedUserCAKey: v.SSHCAPublicKey, HostCA: hostCA,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	trusting, stranger := l.Hosts[0], l.Hosts[1]
	// No authorized keys anywhere: only a certificate lets anyone in.
	for _, h := range l.Hosts {
		if err := h.WriteFile("/root/.ssh/authorized_keys", nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The second host trusts another user CA (sshd reads the file on
	// each connection).
	other := sshtest.NewSigner(t)
	if err := stranger.WriteFile("/etc/ssh/kedge_user_ca.pub", ssh.MarshalAuthorizedKey(other.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	// known_hosts holds only the host CA, no host key.
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(sshtest.CertAuthorityLine("127.0.40.*", hostCA.PublicKey())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := vaultSSHInventory(t, l, v.Address, tokenFile, vaultlab.SSHRole, knownHosts)

	t.Run("certificate login", func(t *testing.T) {
		p, code, errOut := runWaitInv(t, whoAmI(t, trusting.Name), inv)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if s := step(t, p, "login"); s.Attempts != 1 {
			t.Errorf("login = %+v", s)
		}
		got, err := trusting.ReadFile("/var/lib/kedge-login")
		if err != nil || string(got) != "core as root via vault\n" {
			t.Fatalf("login wrote %q (%v)", got, err)
		}
	})

	t.Run("role refuses the user", func(t *testing.T) {
		if _, err := v.Client.Logical().WriteWithContext(t.Context(), vaultlab.SSHPath+"/roles/deploy-only", map[string]any{
			"key_type": "ca", "allow_user_certificates": true, "allowed_users": "deploy", "default_user": "deploy", "ttl": "30m",
		}); err != nil {
			t.Fatal(err)
		}
		denied := vaultSSHInventory(t, l, v.Address, tokenFile, "deploy-only", knownHosts)
		p, code, errOut := runWaitInv(t, whoAmI(t, trusting.Name), denied)
		s := step(t, p, "login")
		if code == 0 || s.State != workflows.StateFailed {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if s.Attempts != 1 || !strings.Contains(s.LastError, "AuthFailed") || !strings.Contains(s.LastError, "deploy-only") {
			t.Errorf("want one attempt failed as AuthFailed naming the role: %+v", s)
		}
	})

	t.Run("host does not trust the CA", func(t *testing.T) {
		p, code, errOut := runWaitInv(t, whoAmI(t, stranger.Name), inv)
		s := step(t, p, "login")
		if code == 0 || s.State != workflows.StateFailed {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if s.Attempts != 1 || !strings.Contains(s.LastError, "AuthFailed") || !strings.Contains(s.LastError, "refused user core") {
			t.Errorf("want one attempt failed as AuthFailed: %+v", s)
		}
		if _, err := stranger.ReadFile("/var/lib/kedge-login"); err == nil {
			t.Error("the command ran on a host that does not trust the CA")
		}
	})

	t.Run("vault down is retried", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := "http://" + ln.Addr().String()
		ln.Close()
		p, code, errOut := runWaitInv(t, whoAmI(t, trusting.Name), vaultSSHInventory(t, l, down, tokenFile, vaultlab.SSHRole, knownHosts))
		s := step(t, p, "login")
		if code == 0 || s.State != workflows.StateFailed {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if s.Attempts != 3 || !strings.Contains(s.LastError, "HostUnreachable") || !strings.Contains(s.LastError, "connection refused") {
			t.Errorf("want three attempts failed as HostUnreachable: %+v", s)
		}
	})

	t.Run("host certificate of an unknown CA", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		stale := sshtest.NewSigner(t)
		if err := os.WriteFile(kh, []byte(sshtest.CertAuthorityLine("127.0.40.*", stale.PublicKey())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, code, errOut := runWaitInv(t, whoAmI(t, trusting.Name), vaultSSHInventory(t, l, v.Address, tokenFile, vaultlab.SSHRole, kh))
		s := step(t, p, "login")
		if code == 0 || s.State != workflows.StateFailed {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if s.Attempts != 1 || !strings.Contains(s.LastError, "HostKeyMismatch") ||
			!strings.Contains(s.LastError, ssh.FingerprintSHA256(hostCA.PublicKey())) || !strings.Contains(s.LastError, ssh.FingerprintSHA256(stale.PublicKey())) {
			t.Errorf("want one attempt failed as HostKeyMismatch naming both CAs: %+v", s)
		}
	})
}
