package nodefiles

import (
	"fmt"
	"net"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"kedge.dev/kedge/actions/imageref"
)

// Container runtimes the kubelet units can run the kubelet with: docker on
// Flatcar Linux, podman on Fedora CoreOS (seed 000).
const (
	RuntimeDocker = "docker"
	RuntimePodman = "podman"
)

// runtimeBinaries are the runtimes' paths on the hosts that ship them.
var runtimeBinaries = map[string]string{
	RuntimeDocker: "/usr/bin/docker",
	RuntimePodman: "/usr/bin/podman",
}

func checkRuntime(p *problems, field, runtime string) {
	if runtime == "" {
		p.add(field, "is required (%s)", quoteList(RuntimeDocker, RuntimePodman))
	} else if _, ok := runtimeBinaries[runtime]; !ok {
		p.add(field, "%q is not a container runtime (want %q or %q)", runtime, RuntimeDocker, RuntimePodman)
	}
}

// checkIP reports a value that is not an IPv4 or IPv6 address.
func checkIP(p *problems, field, s string) {
	if s == "" {
		p.add(field, "is required")
	} else if net.ParseIP(s) == nil {
		p.add(field, "%q is not an IP", s)
	}
}

// checkDNSName reports a value that is not a lowercase DNS name (RFC 1123
// subdomain), the form of node names and cluster domains.
func checkDNSName(p *problems, field, s string) {
	if s == "" {
		p.add(field, "is required")
		return
	}
	if len(validation.IsDNS1123Subdomain(s)) > 0 {
		p.add(field, "%q is not a lowercase DNS name (a-z, 0-9, '-' and '.', starting and ending with a-z or 0-9)", s)
	}
}

// checkImage reports a value that is not a container image reference
// pinned by a tag or digest.
func checkImage(p *problems, field, s string) {
	if s == "" {
		p.add(field, "is required")
		return
	}
	if err := imageref.Check(s); err != nil {
		p.add(field, "%s", err.Error())
	}
}

// checkCIDR reports a value that is not a network in CIDR notation (an
// address with host bits set is refused: it is almost always a typo).
func checkCIDR(p *problems, field, s string) {
	if s == "" {
		p.add(field, "is required")
		return
	}
	ip, network, err := net.ParseCIDR(s)
	if err != nil {
		p.add(field, "%q is not a CIDR", s)
		return
	}
	if !ip.Equal(network.IP) {
		p.add(field, "%q has host bits set (the network is %s)", s, network)
	}
}

// checkName reports an empty value or one with spaces or control
// characters: names that end up in files and command lines.
func checkName(p *problems, field, s string) {
	if s == "" {
		p.add(field, "is required")
		return
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }); i >= 0 {
		p.add(field, "%q holds a space or control character", s)
	}
}

// quoteList formats allowed values for a message: "a", "b" or "c".
func quoteList(vals ...string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = fmt.Sprintf("%q", v)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
