package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
