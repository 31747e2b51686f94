// Package lab turns a set of test hosts into a Kedge cluster inventory: the
// first host is the controller, the others workers. It backs `make dev` and
// the integration tests; it must never describe real hosts.
package lab

import (
	"fmt"
	"strings"

	"kedge.dev/kedge/integration/testhosts"
)

// Names returns host names for a lab of n hosts: controller-1, worker-1, ...
func Names(n int) []string {
	names := []string{"controller-1"}
	for i := 1; i < n; i++ {
		names = append(names, fmt.Sprintf("worker-%d", i))
	}
	return names
}

// Inventory renders a `kind: Cluster` inventory for the lab's hosts, trusting
// the host keys in knownHosts.
func Inventory(name string, l *testhosts.Lab, knownHosts string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kedge/v1\nkind: Cluster\nmetadata:\n  name: %s\nssh:\n  user: core\n  become: sudo\n  identityFile: %s\n  knownHostsFile: %s\n", name, l.IdentityFile, knownHosts)
	for i, h := range l.Hosts {
		switch i {
		case 0:
			b.WriteString("controllers:\n")
		case 1:
			b.WriteString("workers:\n")
		}
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n    port: %d\n", h.Name, h.Address, h.Port)
	}
	return b.String()
}
