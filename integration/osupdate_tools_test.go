package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/runbooks/inventory"
)

// host.os-update and host.reboot on each OS family's hosts (the update
// tools' stand-ins answer as the real ones do), as `core` through sudo:
// nothing staged and no reboot needed before an offer; then the offer
// staged with the family's tool, the reboot done once (a second call
// with the same boot ID reboots nothing), and the host back running the
// staged version; staged again, nothing is left to stage.
func TestOSUpdateActionsOnEachFamily(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	names := []string{"controller-1", "worker-1", "worker-2"}
	families := map[string]testhosts.OSFamily{"controller-1": testhosts.FedoraCoreOS, "worker-1": testhosts.Flatcar, "worker-2": testhosts.Debian}
	l, err := testhosts.Start(context.Background(), testhosts.Options{Count: 3, Names: names, BaseIP: "127.0.63.", Dir: filepath.Join(dir, "hosts"), HostOS: families})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(lab.Inventory("families", l, l.KnownHostsFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.LoadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { _ = pool.Close() })
	acts := &sshhost.Activities{Pool: pool}
	offers := map[string]testhosts.Update{
		"controller-1": {Version: "40.20240504.3.0"},
		"worker-1":     {Version: "3815.2.5"},
		"worker-2": {Packages: []testhosts.Package{
			{Name: "linux-image-amd64", Version: "6.1.90-1", Depends: []string{"linux-image-" + osUpdateKernel}},
			{Name: "linux-image-" + osUpdateKernel, Version: "6.1.90-1"},
		}},
	}
	next := map[string]string{"controller-1": "40.20240504.3.0", "worker-1": "3815.2.5", "worker-2": osUpdateKernel}
	updater := map[string]string{"controller-1": host.UpdaterRPMOSTree, "worker-1": host.UpdaterUpdateEngine, "worker-2": host.UpdaterApt}
	for i, name := range names {
		h := l.Hosts[i]
		target, err := cluster.Target(name)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		res, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target})
		if err != nil || res.Updater != updater[name] || res.RebootRequired || res.Staged || res.Next != res.Booted {
			t.Fatalf("%s before an offer: %+v, %v", name, res, err)
		}
		if err := h.OfferUpdate(offers[name]); err != nil {
			t.Fatal(err)
		}
		staged, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target})
		if err != nil || !staged.Staged || !staged.RebootRequired || staged.Next != next[name] || staged.Booted == next[name] {
			t.Fatalf("%s staged: %+v, %v; want %s next", name, staged, err, next[name])
		}
		boots := h.Boots()
		back, err := acts.Reboot(ctx, host.RebootInput{Target: target, NotBootID: staged.BootID, Within: "2m"})
		if err != nil || back.BootID == staged.BootID || back.Booted != next[name] || back.RebootedAt == "" {
			t.Fatalf("%s rebooted: %+v, %v", name, back, err)
		}
		again, err := acts.Reboot(ctx, host.RebootInput{Target: target, NotBootID: staged.BootID})
		if err != nil || again.BootID != back.BootID || h.Boots() != boots+1 {
			t.Errorf("%s: a second reboot call for the same boot: %+v, %v; %d boots, want %d", name, again, err, h.Boots(), boots+1)
		}
		after, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target})
		if err != nil || after.RebootRequired || after.Booted != next[name] {
			t.Errorf("%s after its reboot: %+v, %v", name, after, err)
		}
	}
}

// TestOSUpdateRefusedWhileZincatiDrives: a Fedora CoreOS host whose
// zincati.service runs (registered as rpm-ostree's update driver, as on
// a real one) is not staged by host.os-update: rpm-ostree refuses, and
// Kedge says why and what to choose, not retried, nothing staged. With
// bypassUpdateDriver it stages; after the reboot Zincati registers
// again and is refused again; with zincati.service stopped, it stages.
func TestOSUpdateRefusedWhileZincatiDrives(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	l, err := testhosts.Start(context.Background(), testhosts.Options{Count: 1, Names: []string{"fcos-1"}, BaseIP: "127.0.64.", Dir: filepath.Join(dir, "hosts"),
		OS: testhosts.FedoraCoreOS, Zincati: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(lab.Inventory("zincati", l, l.KnownHostsFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.LoadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	target, err := cluster.Target("fcos-1")
	if err != nil {
		t.Fatal(err)
	}
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { _ = pool.Close() })
	acts := &sshhost.Activities{Pool: pool}
	h, ctx := l.Hosts[0], t.Context()
	refused := func(when string) {
		t.Helper()
		res, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target})
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != errtype.UpdateDriverActive || !ae.NonRetryable() ||
			!strings.Contains(ae.Error(), "driven by Zincati (zincati.service)") || !strings.Contains(ae.Error(), "bypassUpdateDriver") {
			t.Fatalf("%s: os-update while Zincati runs: %+v, %v", when, res, err)
		}
		if check, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target, CheckOnly: true}); err != nil || check.Staged || check.RebootRequired {
			t.Fatalf("%s: a check while Zincati runs: %+v, %v", when, check, err)
		}
	}

	if err := h.OfferUpdate(testhosts.Update{Version: "40.20240504.3.0"}); err != nil {
		t.Fatal(err)
	}
	refused("first boot")
	staged, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target, BypassUpdateDriver: true})
	if err != nil || !staged.Staged || staged.Next != "40.20240504.3.0" {
		t.Fatalf("with bypassUpdateDriver: %+v, %v", staged, err)
	}
	if back, err := acts.Reboot(ctx, host.RebootInput{Target: target, NotBootID: staged.BootID, Within: "2m"}); err != nil || back.Booted != "40.20240504.3.0" {
		t.Fatalf("rebooted: %+v, %v", back, err)
	}

	// zincati.service started at boot and registered again.
	if err := h.OfferUpdate(testhosts.Update{Version: "40.20240519.3.0"}); err != nil {
		t.Fatal(err)
	}
	refused("after the reboot")
	if out, err := h.Exec(ctx, "systemctl", "stop", "zincati.service"); err != nil {
		t.Fatalf("stop zincati: %v: %s", err, out)
	}
	if res, err := acts.OSUpdate(ctx, host.OSUpdateInput{Target: target}); err != nil || !res.Staged || res.Next != "40.20240519.3.0" {
		t.Fatalf("with zincati.service stopped: %+v, %v", res, err)
	}
}
