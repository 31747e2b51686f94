// Command kedge-lab is `make dev`: SSH test hosts on loopback, an inventory
// for them, and `kedge dev` (Temporal server, Web UI, worker) in one process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/worker"
)

func main() {
	dir := flag.String("dir", ".lab", "where the lab keeps keys, host files and Temporal state")
	n := flag.Int("hosts", 3, "number of SSH hosts (one controller, the rest workers)")
	baseIP := flag.String("base-ip", "127.0.10.", "hosts listen on BASE-IP.1, .2, ... port 22")
	addr := flag.String("address", "127.0.0.1:7233", "Temporal frontend address")
	ui := flag.String("ui-address", "127.0.0.1:8233", "Web UI address")
	flag.Parse()
	if err := run(*dir, *n, *baseIP, *addr, *ui); err != nil {
		fmt.Fprintln(os.Stderr, "kedge-lab:", err)
		os.Exit(1)
	}
}

func run(dir string, n int, baseIP, addr, ui string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := testhosts.RequireTools(); err != nil {
		return err
	}
	hosts, err := testhosts.Start(ctx, testhosts.Options{Count: n, Names: lab.Names(n), BaseIP: baseIP, Dir: filepath.Join(dir, "hosts")})
	if err != nil {
		return err
	}
	defer hosts.Close()
	inv := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(inv, []byte(lab.Inventory("lab", hosts, hosts.KnownHostsFile)), 0o644); err != nil {
		return err
	}
	return starter.RunDev(ctx, starter.DevOptions{
		DataDir: filepath.Join(dir, "temporal"), Address: addr, UIAddress: ui, Namespace: "default", TaskQueue: worker.DefaultTaskQueue,
		Ready: func(s *devserver.Server) {
			fmt.Printf("\nkedge lab is up: %d SSH hosts, inventory %s\n", n, inv)
			fmt.Printf("try:  bin/kedge run examples/hello.yaml --inventory %s --wait\n", inv)
			fmt.Printf("then open %s to see it in the Temporal Web UI\n\n", s.UIURL())
		},
	}, os.Stderr)
}
