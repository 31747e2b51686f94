package pkihost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/actions/pki"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

// lossyHosts loses the worker inside host.install-bundle's script once:
// after every changed file was backed up and the first renames of the
// bundle were done (what a worker killed between two of the script's
// renames leaves on the host), the attempt ends with no result.
type lossyHosts struct {
	localLinks
	renames int // bundle files renamed into place before the loss; -1: none lost
}

var errWorkerLost = errors.New("the worker was lost")

func (l *lossyHosts) InstallBundle(ctx context.Context, in host.InstallBundleInput) (host.InstallBundleResult, error) {
	res, err := l.localLinks.InstallBundle(ctx, in)
	if err != nil || l.renames < 0 {
		return res, err
	}
	n := min(l.renames, len(res.Files))
	l.renames = -1
	// The renames after the n-th did not happen: those files are as they
	// were (their backups stay), the ones they would create are absent.
	rest := res.Files[n:]
	var created []string
	for _, p := range res.Created {
		if slices.Contains(rest, p) {
			created = append(created, p)
		}
	}
	if _, err := l.RestoreBundle(ctx, host.RestoreBundleInput{Target: in.Target, Files: rest, Backup: res.Backup, Created: created, Changed: &res.Changed}); err != nil {
		return host.InstallBundleResult{}, err
	}
	return host.InstallBundleResult{}, errWorkerLost
}

// hostFile is a file on the test host as it is: its bytes, mode and
// owner, or where it links to.
type hostFile struct {
	content, link string
	mode          fs.FileMode
	uid, gid      uint32
}

// snapshot is every file under the host's root.
func (h *rotationHost) snapshot(t *testing.T) map[string]hostFile {
	t.Helper()
	out := map[string]hostFile{}
	err := filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		f := hostFile{mode: fi.Mode(), uid: st.Uid, gid: st.Gid}
		if fi.Mode()&fs.ModeSymlink != 0 {
			f.link, err = os.Readlink(p)
		} else {
			var b []byte
			b, err = os.ReadFile(p)
			f.content = string(b)
		}
		out[p] = f
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(before, after map[string]hostFile) []string {
	var d []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			d = append(d, p+": gone")
		case a != b:
			d = append(d, p+": differs")
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, p+": new")
		}
	}
	slices.Sort(d)
	return d
}

// rotateAsActivity runs pki.rotate-ca as an activity of one workflow run
// (each call: another attempt of the same step, as the runbook workflow
// makes after a lost worker).
func (h *rotationHost) rotateAsActivity(t *testing.T, in pki.RotateCAInput) (pki.RotateCAResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(h.acts.RotateCA, activity.RegisterOptions{Name: pki.RotateCAAction})
	v, err := env.ExecuteActivity(pki.RotateCAAction, in)
	if err != nil {
		return pki.RotateCAResult{}, err
	}
	var res pki.RotateCAResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

func (h *rotationHost) rotateInput(stage, scope string) pki.RotateCAInput {
	return pki.RotateCAInput{Target: h.target, Vault: target.Vault{Address: h.vaultURL}, Stage: stage, Scope: scope,
		Files: cloneFiles(h.files), StaticPods: map[string]string{"kube-controller-manager": h.manifest}, Kind: layout.KindTyphoonFlatcar,
		ClusterCA:      pki.CARotation{Old: h.ca.pem, New: h.next.pem, Issuer: "cluster-next", Key: h.nextKey},
		EtcdCA:         pki.CARotation{Old: h.etcdCA.pem, New: h.etcdNext.pem, Issuer: "etcd-next"},
		ServiceAccount: pki.KeyRotation{OldPublic: h.saOld, NewPublic: h.saNew, NewPrivate: h.saNewKey}}
}

// relative is a result as JSON with the host's root cut from its paths
// and without its backup (named after the bundle's content).
func relative(t *testing.T, res pki.RotateCAResult, root string) string {
	t.Helper()
	res.Backup = ""
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), root, "ROOT")
}

func (h *rotationHost) relative(t *testing.T, res pki.RotateCAResult) string {
	return relative(t, res, h.root)
}

func cloneFiles(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A worker lost anywhere inside pki.rotate-ca's install: the next attempt
// of the step (the same input, the layout from before the install, the
// same run) finishes the same install, with the result the first attempt
// would have had; an attempt after that changes nothing; the undo puts
// back every file byte for byte, the controller manager's manifest with
// its signer flags on ca.crt and ca.key and no ca-signer.* left.
func TestRotateCAResumesAnInstallCutShort(t *testing.T) {
	h := newRotationHost(t)
	in := h.rotateInput(pki.StageTrust, pki.ScopeControlPlane)
	whole, err := h.rotateAsActivity(t, in)
	if err != nil {
		t.Fatal(err)
	}
	whole0 := h.root
	n := len(whole.Files)
	if n < 4 {
		t.Fatalf("the trust stage installs %d files: %v", n, whole.Files)
	}
	type loss struct {
		name    string
		renames int    // the install's renames before the loss, -1: none
		after   string // the journal's write after which the worker is lost
	}
	losses := []loss{{"lost after writing the plan", -1, "plan"}, {"lost after setting the mark pending", -1, "mark"}}
	for renames := 0; renames <= n+1; renames++ { // the bundle's last file is the journal's mark
		losses = append(losses, loss{fmt.Sprintf("lost after %d of the install's %d renames", renames, n+1), renames, ""})
	}
	losses = append(losses, loss{"lost after the install", -1, "install"}, loss{"lost after recording it done", -1, "done"})
	for _, l := range losses {
		t.Run(l.name, func(t *testing.T) {
			h := newRotationHost(t)
			h.checkResumes(t, pki.StageTrust, l.renames, l.after, func(res pki.RotateCAResult) {
				if got, want := h.relative(t, res), relative(t, whole, whole0); got != want {
					t.Errorf("the result after the lost attempt:\n%s\nwant what the whole attempt returns on another host:\n%s", got, want)
				}
				signer := filepath.Join(filepath.Dir(h.files[layout.FileClusterCA]), "ca-signer.crt")
				if !slices.Equal(res.Created, []string{signer, signer[:len(signer)-len("crt")] + "key"}) {
					t.Errorf("created %v, want the signer's own files", res.Created)
				}
				if got := h.certs(t, signer); !slices.Equal(got, []string{"kubernetes-ca"}) {
					t.Errorf("ca-signer.crt: %v", got)
				}
				if got := h.certs(t, h.files[layout.FileClusterCA]); !slices.Equal(got, []string{"kubernetes-ca", "kubernetes-ca-2"}) {
					t.Errorf("ca.crt: %v", got)
				}
				if m := read(t, h.manifest); strings.Count(m, signerWas) != 2 {
					t.Errorf("the manifest is not split once:\n%s", m)
				}
			})
		})
	}
}

// The same in the reissue stage, whose certificates Vault issues anew on
// each plan: the next attempt installs the first attempt's.
func TestRotateCAResumesAReissueCutShort(t *testing.T) {
	h := newRotationHost(t)
	if _, err := h.rotateAsActivity(t, h.rotateInput(pki.StageTrust, pki.ScopeControlPlane)); err != nil {
		t.Fatal(err)
	}
	pkiDir := filepath.Dir(h.files[layout.FileClusterCA])
	h.files[layout.FileClusterSigner], h.files[layout.FileClusterCAKey] = filepath.Join(pkiDir, signerCert), filepath.Join(pkiDir, signerKey)
	signs := h.vault.signs
	h.checkResumes(t, pki.StageReissue, 3, "", func(res pki.RotateCAResult) {
		if len(res.Reissued) != 3 {
			t.Errorf("reissued %v", res.Reissued)
		}
		if got := h.certs(t, filepath.Join(pkiDir, signerCert)); !slices.Equal(got, []string{"kubernetes-ca-2"}) {
			t.Errorf("ca-signer.crt after reissue: %v", got)
		}
		for _, p := range []string{h.files[layout.FileAPIServerCert], h.files[layout.FileEtcdServerCert]} {
			leaf, _ := firstCert([]byte(read(t, p)))
			if leaf.CheckSignatureFrom(h.next.cert) != nil && leaf.CheckSignatureFrom(h.etcdNext.cert) != nil {
				t.Errorf("%s is from %q after reissue", p, leaf.Issuer.CommonName)
			}
		}
	})
	if h.vault.signs != signs+3 {
		t.Errorf("Vault signed %d certificates for one reissue, want 3: the next attempt issued them anew", h.vault.signs-signs)
	}
}

// checkResumes runs stage with the worker lost after renames of the
// install's renames or after the journal's write named after, then
// again, and checks the host and the undo.
func (h *rotationHost) checkResumes(t *testing.T, stage string, renames int, after string, check func(pki.RotateCAResult)) {
	t.Helper()
	in := h.rotateInput(stage, pki.ScopeControlPlane)
	before := h.snapshot(t)
	lossy := &lossyHosts{localLinks: h.acts.Hosts.(localLinks), renames: renames}
	h.acts.Hosts = lossy
	h.acts.loseAfter = func(what string) error {
		if what != after {
			return nil
		}
		h.acts.loseAfter = nil
		return errWorkerLost
	}
	if _, err := h.rotateAsActivity(t, in); err == nil || !strings.Contains(err.Error(), errWorkerLost.Error()) {
		t.Fatalf("the first attempt: %v, want the worker lost", err)
	}
	res, err := h.rotateAsActivity(t, in)
	if err != nil {
		t.Fatalf("the attempt after the lost one: %v", err)
	}
	if !res.Changed || res.Backup == "" || len(res.Files) == 0 {
		t.Fatalf("the attempt after the lost one: %+v", res)
	}
	check(res)
	installed := h.snapshot(t)
	again, err := h.rotateAsActivity(t, in)
	if err != nil {
		t.Fatalf("one more attempt: %v", err)
	}
	if !reflect.DeepEqual(again, res) {
		t.Errorf("one more attempt's result:\n%+v\nwant\n%+v", again, res)
	}
	if d := diffSnapshots(installed, h.snapshot(t)); len(d) > 0 {
		t.Errorf("one more attempt changed the host: %v", d)
	}
	if _, err := lossy.RestoreBundle(t.Context(), host.RestoreBundleInput{Target: h.target, Files: res.Files, Backup: res.Backup, Created: res.Created, Changed: &res.Changed}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, h.snapshot(t)); len(d) > 0 {
		t.Errorf("the undo did not put the host back: %v", d)
	}
}
