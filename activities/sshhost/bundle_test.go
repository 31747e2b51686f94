package sshhost

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

func readMode(t *testing.T, p string) (string, os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), fi.Mode().Perm()
}

func TestInstallBundleAllOrNoneAndRestore(t *testing.T) {
	w := newWorld(t)
	root := t.TempDir()
	a, b, c := filepath.Join(root, "etc/kubernetes/pki/ca.key"), filepath.Join(root, "etc/kubernetes/manifests/etcd.yaml"), filepath.Join(root, "var/lib/x/keep")
	if err := os.MkdirAll(filepath.Dir(c), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []host.BundleFile{{Path: a, Content: "KEY", Mode: "0600"}, {Path: b, Content: "pod"}, {Path: c, Content: "new"}}
	res, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Backup == "" || !slices.Equal(res.Created, []string{a, b}) {
		t.Fatalf("first install: %+v", res)
	}
	for _, f := range []struct {
		p, content string
		mode       os.FileMode
	}{{a, "KEY", 0o600}, {b, "pod", 0o644}, {c, "new", 0o644}} {
		if got, mode := readMode(t, f.p); got != f.content || mode != f.mode {
			t.Errorf("%s: %q %o, want %q %o", f.p, got, mode, f.content, f.mode)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*/*/.*.kedge-new")); len(left) > 0 {
		t.Errorf("staged files left: %v", left)
	}

	// The same bundle again changes nothing.
	again, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: files})
	if err != nil || again.Changed {
		t.Fatalf("second install: %+v %v", again, err)
	}

	// Undo: the replaced file comes back, the created ones go.
	back, err := w.acts.RestoreBundle(t.Context(), host.RestoreBundleInput{Target: w.tg, Files: res.Files, Backup: res.Backup, Created: res.Created})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readMode(t, c); got != "old" {
		t.Errorf("%s restored to %q", c, got)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after the undo (%v)", p, err)
		}
	}
	if !slices.Equal(back.Restored, []string{c}) || !slices.Equal(back.Removed, []string{a, b}) {
		t.Errorf("restore result %+v", back)
	}
}

// A file that cannot be staged (its directory is a file) fails the
// install before any target changes.
func TestInstallBundleFailureChangesNothing(t *testing.T) {
	w := newWorld(t)
	root := t.TempDir()
	good := filepath.Join(root, "good")
	if err := os.WriteFile(good, []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(root, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: []host.BundleFile{
		{Path: good, Content: "after"}, {Path: filepath.Join(blocker, "child"), Content: "x"},
	}})
	appErr(t, err, errtype.CommandFailed, false)
	if got, _ := readMode(t, good); got != "before" {
		t.Errorf("%s became %q though the install failed", good, got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(good), "."+filepath.Base(good)+".kedge-new")); !os.IsNotExist(err) {
		t.Errorf("staged file left behind (%v)", err)
	}
}

func TestInstallBundleRefusesBadInput(t *testing.T) {
	w := newWorld(t)
	for _, files := range [][]host.BundleFile{
		nil,
		{{Path: "relative/path", Content: "x"}},
		{{Path: "/a b", Content: "x"}},
		// A glob would match the host's files: /etc/* would overwrite
		// every file in /etc.
		{{Path: "/etc/*", Content: "x"}},
		{{Path: "/etc/kubernetes/kubelet.[ya]ml", Content: "x"}},
		{{Path: "/x", Content: "1"}, {Path: "/x", Content: "2"}},
		{{Path: "/x", Content: "1", Mode: "999"}},
	} {
		_, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: files})
		appErr(t, err, errtype.InvalidInput, true)
	}
}

func TestCertInfoReadsFilesAndKubeconfigs(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	// A certificate the sshtest server made for itself is enough: any PEM
	// certificate will do.
	certPEM := testCertPEM(t)
	pemPath, missing := filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "gone.crt")
	if err := os.WriteFile(pemPath, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := w.acts.CertInfo(t.Context(), host.CertInfoInput{Target: w.tg, Paths: []string{pemPath, missing}, Threshold: "48h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || !res.Files[0].Exists || res.Files[1].Exists || !res.Due || res.Earliest != res.Files[0].NotAfter {
		t.Fatalf("%+v", res)
	}
	res, err = w.acts.CertInfo(t.Context(), host.CertInfoInput{Target: w.tg, Paths: []string{pemPath}, Threshold: "1m"})
	if err != nil || res.Due {
		t.Errorf("a day-long certificate is due within a minute: %+v %v", res, err)
	}
	bad := filepath.Join(dir, "notes.txt")
	_ = os.WriteFile(bad, []byte("hello"), 0o644)
	_, err = w.acts.CertInfo(t.Context(), host.CertInfoInput{Target: w.tg, Paths: []string{bad}})
	appErr(t, err, errtype.InvalidInput, true)
}

func testCertPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
