package testhosts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A simulated host's containerd has the control plane's images in k8s.io,
// for root only, through the ctr stand-in, which Kedge's user reaches with
// sudo as on a real host.
func TestCtrStandInOnAHost(t *testing.T) {
	l := startLab(t, 1, "127.0.36.")
	h := l.Hosts[0]
	c := dial(t, l, h)
	const apiserver = "registry.k8s.io/kube-apiserver:v1.35.4"

	if got := sh(t, c, asRoot("command -v ctr")); got != StandInDir+"/ctr" {
		t.Fatalf("root's ctr is %s, want the stand-in", got)
	}
	list := sh(t, c, "sudo -n ctr -a /run/containerd/containerd.sock -n k8s.io images ls -q")
	var want []string
	for _, im := range CRIImages() {
		want = append(want, im.Ref)
	}
	if list != strings.Join(want, "\n") || !strings.Contains(list, apiserver) {
		t.Errorf("ctr images ls -q:\n%s\nwant:\n%s", list, strings.Join(want, "\n"))
	}
	// (The login user's PATH has no /usr/local/sbin: its `ctr` is the
	// machine's, if any.)
	if got := sh(t, c, StandInDir+"/ctr -n k8s.io images ls -q 2>&1 || echo refused"); !strings.Contains(got, "permission denied") || !strings.HasSuffix(got, "refused") {
		t.Errorf("ctr without sudo: %s", got)
	}
	if got := sh(t, c, "sudo -n ctr images ls -q"); got != "" {
		t.Errorf("the default namespace has images: %s", got)
	}
	// containerd's images are not docker's.
	if got := sh(t, c, "sudo -n ctr -n k8s.io images pull quay.io/poseidon/kubelet:v1.35.4 2>&1 || echo refused"); !strings.Contains(got, "no such host") || !strings.HasSuffix(got, "refused") {
		t.Errorf("ctr pulled docker's image: %s", got)
	}
	if got := sh(t, c, "df -Pk /var/lib/containerd | tail -1"); !strings.HasSuffix(got, "/var/lib") {
		t.Errorf("df of /var/lib/containerd: %s", got)
	}

	// Pulls are logged; added and removed images count at once.
	const next = "registry.k8s.io/kube-apiserver:v1.36.0"
	if got := sh(t, c, "sudo -n ctr -n k8s.io images pull "+next+" 2>&1 || echo refused"); !strings.HasSuffix(got, "refused") {
		t.Fatalf("pulled %s before it was there: %s", next, got)
	}
	if err := h.AddCRIImage(next); err != nil {
		t.Fatal(err)
	}
	if err := h.AddCRIImage(next); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "sudo -n ctr -n k8s.io images pull "+next); !strings.Contains(got, "unpacking linux/amd64 sha256:") {
		t.Errorf("pull of an added image: %s", got)
	}
	if err := h.RemoveCRIImage(apiserver); err != nil {
		t.Fatal(err)
	}
	if err := h.RemoveCRIImage(apiserver); err == nil {
		t.Error("removed an image that is not there")
	}
	list = sh(t, c, "sudo -n ctr -n k8s.io images ls -q")
	if strings.Contains(list, apiserver+"\n") || strings.Count(list, next) != 1 || strings.Count(list, "\n") != len(want)-1 {
		t.Errorf("after adding %s (twice) and removing %s:\n%s", next, apiserver, list)
	}
	log, err := h.ReadFile(PullLog)
	if err != nil {
		t.Fatal(err)
	}
	var ctrPulls []string
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "ctr" {
			ctrPulls = append(ctrPulls, f[2])
		}
	}
	if len(ctrPulls) != 1 || ctrPulls[0] != next {
		t.Errorf("ctr pulls logged: %q, want only %s:\n%s", ctrPulls, next, log)
	}
}

// A host with a real containerd keeps the machine's ctr and containerd's
// own directory.
func TestRealContainerdHostsGetNoCtrStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("prepares SSH hosts")
	}
	for _, realCtd := range []bool{false, true} {
		l, err := Prepare(Options{Count: 1, BaseIP: "127.0.36.", Dir: t.TempDir(), RealContainerd: realCtd})
		if err != nil {
			t.Fatal(err)
		}
		h := l.Hosts[0]
		for _, p := range []string{"bin/ctr", "varlib-upper/kedge-lab/cri-image-store", "varlib-upper/containerd"} {
			if _, err := os.Stat(filepath.Join(h.dir, p)); (err == nil) == realCtd {
				t.Errorf("RealContainerd %v: %s: %v", realCtd, p, err)
			}
		}
		if _, err := os.Stat(filepath.Join(h.dir, "bin/docker")); err != nil {
			t.Errorf("RealContainerd %v: no docker stand-in: %v", realCtd, err)
		}
		if realCtd {
			if err := h.AddCRIImage("registry.k8s.io/pause:3.10"); err == nil || !strings.Contains(err.Error(), "real containerd") {
				t.Errorf("AddCRIImage on a real containerd's host: %v", err)
			}
		}
	}
}
