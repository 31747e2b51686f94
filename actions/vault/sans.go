package vault

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Names are a certificate request's subject alternative names, sorted by
// kind: altNames and the names of sans as DNS names, ipSANs and the IPs of
// sans as IP addresses, each once, in the order given. A value of the
// wrong kind, or one that is neither, is refused by its field and index:
// Vault reads its lists comma-separated, so a comma would smuggle in a
// name no one asked for.
func (in IssueCertInput) Names() (dns, ips []string, err error) {
	add := func(list *[]string, v string) {
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for i, n := range in.AltNames {
		if !IsDNSName(n) {
			return nil, nil, fmt.Errorf("altNames[%d]: %q is not a DNS name%s", i, n, ipHint(n, "ipSANs"))
		}
		add(&dns, n)
	}
	for i, v := range in.IPSANs {
		ip := net.ParseIP(v)
		if ip == nil {
			return nil, nil, fmt.Errorf("ipSANs[%d]: %q is not an IP address%s", i, v, nameHint(v))
		}
		add(&ips, ip.String())
	}
	for i, v := range in.SANs {
		switch ip := net.ParseIP(v); {
		case ip != nil:
			add(&ips, ip.String())
		case IsDNSName(v):
			add(&dns, v)
		default:
			return nil, nil, fmt.Errorf("sans[%d]: %q is neither an IP address nor a DNS name", i, v)
		}
	}
	return dns, ips, nil
}

func ipHint(v, field string) string {
	if net.ParseIP(v) != nil {
		return " (an IP address: give it in " + field + " or sans)"
	}
	return ""
}

func nameHint(v string) string {
	if IsDNSName(v) {
		return " (a DNS name: give it in altNames, or in sans, which takes either)"
	}
	return ""
}

// IsDNSName says whether s is a DNS name a certificate may carry: labels
// of letters, digits and hyphens (not at a label's ends), dot-separated,
// at most 253 bytes, the first label "*" for a wildcard. An IP address
// is not one.
func IsDNSName(s string) bool {
	if s == "" || len(s) > 253 || net.ParseIP(s) != nil {
		return false
	}
	labels := strings.Split(strings.TrimSuffix(s, "."), ".")
	for i, label := range labels {
		if label == "*" && i == 0 && len(labels) > 1 {
			continue
		}
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
