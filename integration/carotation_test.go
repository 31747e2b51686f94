package integration

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	data, err := host(t, "worker-1").ReadFile("/etc/kedge-rotation/leaves.pem")
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
	_, _ = host(t, "worker-1").Exec(t.Context(), "rm", "-rf", "/etc/kedge-rotation")
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
