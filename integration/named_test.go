package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// namedInventory is the inventory at inv with every host named by its
// DNS name (its Typhoon domain) instead of its IP, as bare-metal Typhoon
// names hosts and its own Terraform reaches them: known_hosts keyed by
// those names, and the runs on queue, which namedWorker serves.
func namedInventory(t *testing.T, w *typhoonLab, inv, queue string) string {
	t.Helper()
	text := string(must(os.ReadFile(inv)))
	known := string(must(os.ReadFile(w.lab.KnownHostsFile)))
	for _, h := range w.lab.Hosts {
		name := typhoonFQDN(h.Name)
		text = strings.ReplaceAll(text, "    address: "+h.Address+"\n", "    address: "+name+"\n")
		known = strings.ReplaceAll(known, h.Address+" ", name+" ")
	}
	if strings.Contains(text, "address: 127.") {
		t.Fatalf("a host is still named by IP in\n%s", text)
	}
	dir := t.TempDir()
	knownFile := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownFile, []byte(known), 0o644); err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "knownHostsFile: "+w.lab.KnownHostsFile+"\n", "knownHostsFile: "+knownFile+"\n", 1)
	text = strings.Replace(text, "\nssh:\n", "\ntaskQueue: "+queue+"\nssh:\n", 1)
	out := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// namedWorker runs `kedge worker` on queue for inventory in a mount
// namespace of its own, where /etc/hosts also names each of w's hosts by
// its domain, as a site's DNS would (the machine's own /etc/hosts is not
// touched, and the mount goes with the process).
func namedWorker(t *testing.T, w *typhoonLab, queue, inventory string) {
	t.Helper()
	hosts := string(must(os.ReadFile("/etc/hosts")))
	for _, h := range w.lab.Hosts {
		hosts += fmt.Sprintf("%s %s\n", h.Address, typhoonFQDN(h.Name))
	}
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`,
		file, world.kedgeBin, "worker", "--address", world.srv.FrontendAddress(), "--task-queue", queue, "--identity", queue, "--clusters", inventory)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}
