package vaultlab

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"reflect"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestVaultIssuesSignsAndStores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Vault server")
	}
	ctx := context.Background()
	began := time.Now()
	v, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	t.Logf("vault at %s ready and configured in %v", v.Address, time.Since(began).Round(time.Millisecond))

	t.Run("pki", func(t *testing.T) {
		s, err := v.Client.Logical().WriteWithContext(ctx, PKIPath+"/issue/"+PKIRole, map[string]any{
			"common_name": "node-1",
			"ip_sans":     "127.0.0.1",
		})
		if err != nil {
			t.Fatal(err)
		}
		certPEM, _ := dataString(s, "certificate")
		block, _ := pem.Decode([]byte(certPEM))
		if block == nil {
			t.Fatalf("no PEM certificate in %v", s.Data)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(v.CACertPEM) {
			t.Fatalf("CACertPEM holds no certificate: %q", v.CACertPEM)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatalf("the issued certificate does not verify against the lab CA: %v", err)
		}
		if err := cert.VerifyHostname("127.0.0.1"); err != nil {
			t.Errorf("IP SAN: %v", err)
		}
		if cert.Subject.CommonName != "node-1" || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("subject %v, IP SANs %v", cert.Subject, cert.IPAddresses)
		}
		if cert.Issuer.CommonName != CACommonName {
			t.Errorf("issuer %v", cert.Issuer)
		}
	})

	t.Run("ssh", func(t *testing.T) {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		sshPub, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		s, err := v.Client.Logical().WriteWithContext(ctx, SSHPath+"/sign/"+SSHRole, map[string]any{
			"public_key": string(ssh.MarshalAuthorizedKey(sshPub)),
		})
		if err != nil {
			t.Fatal(err)
		}
		signed, _ := dataString(s, "signed_key")
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(signed))
		if err != nil {
			t.Fatalf("parse the signed key %q: %v", signed, err)
		}
		cert, ok := key.(*ssh.Certificate)
		if !ok {
			t.Fatalf("signed key is a %T, not a certificate", key)
		}
		ca, _, _, _, err := ssh.ParseAuthorizedKey([]byte(v.SSHCAPublicKey))
		if err != nil {
			t.Fatalf("parse SSHCAPublicKey %q: %v", v.SSHCAPublicKey, err)
		}
		if !bytes.Equal(cert.SignatureKey.Marshal(), ca.Marshal()) {
			t.Fatalf("certificate signed by %s, want the lab CA %s", ssh.FingerprintSHA256(cert.SignatureKey), ssh.FingerprintSHA256(ca))
		}
		if !bytes.Equal(cert.Key.Marshal(), sshPub.Marshal()) {
			t.Errorf("certificate is for another key")
		}
		checker := &ssh.CertChecker{IsUserAuthority: func(auth ssh.PublicKey) bool {
			return bytes.Equal(auth.Marshal(), ca.Marshal())
		}}
		if err := checker.CheckCert("core", cert); err != nil {
			t.Fatalf("certificate does not check as a user certificate for core: %v", err)
		}
		if cert.CertType != ssh.UserCert || !reflect.DeepEqual(cert.ValidPrincipals, []string{"core"}) {
			t.Errorf("type %d, principals %v", cert.CertType, cert.ValidPrincipals)
		}
		if _, ok := cert.Permissions.Extensions["permit-pty"]; !ok {
			t.Errorf("extensions %v lack permit-pty", cert.Permissions.Extensions)
		}
		if life := time.Duration(cert.ValidBefore-cert.ValidAfter) * time.Second; life > 31*time.Minute {
			t.Errorf("certificate valid for %v, want 30m", life)
		}
	})

	t.Run("kv", func(t *testing.T) {
		kv := v.Client.KVv2(KVPath)
		want := map[string]any{"user": "kedge", "password": "s3cret"}
		if _, err := kv.Put(ctx, "kedge/probe", want); err != nil {
			t.Fatal(err)
		}
		got, err := kv.Get(ctx, "kedge/probe")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Data, want) || got.VersionMetadata == nil || got.VersionMetadata.Version != 1 {
			t.Fatalf("read back %v (metadata %+v), want %v at version 1", got.Data, got.VersionMetadata, want)
		}
	})
}
