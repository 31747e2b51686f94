package vault

import (
	"slices"
	"strings"
	"testing"
)

// An inventory's addresses, names or IPs, go where each belongs.
func TestNamesSortsAddressesByKind(t *testing.T) {
	in := IssueCertInput{
		AltNames: []string{"tyc4.typhoon.test", "localhost"},
		IPSANs:   []string{"127.0.0.1"},
		SANs:     []string{"tyc4.typhoon.test", "10.0.0.14", "::1", "localhost"},
	}
	dns, ips, err := in.Names()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dns, []string{"tyc4.typhoon.test", "localhost"}) || !slices.Equal(ips, []string{"127.0.0.1", "10.0.0.14", "::1"}) {
		t.Errorf("dns %v, ips %v", dns, ips)
	}
}

// A value of the wrong kind is refused by field and index, and a comma
// (Vault's list separator) never reaches Vault.
func TestNamesRefusesWhatIsNotItsKind(t *testing.T) {
	for _, c := range []struct {
		in   IssueCertInput
		want string
	}{
		{IssueCertInput{IPSANs: []string{"127.0.0.1", "tyc4.typhoon.test"}}, `ipSANs[1]: "tyc4.typhoon.test" is not an IP address (a DNS name: give it in altNames`},
		{IssueCertInput{AltNames: []string{"10.0.0.1"}}, `altNames[0]: "10.0.0.1" is not a DNS name (an IP address`},
		{IssueCertInput{AltNames: []string{"api.example,evil.example"}}, `altNames[0]: "api.example,evil.example" is not a DNS name`},
		{IssueCertInput{SANs: []string{"a.example", "10.0.0.1,evil.example"}}, `sans[1]: "10.0.0.1,evil.example" is neither`},
		{IssueCertInput{SANs: []string{"-bad.example"}}, `sans[0]`},
		{IssueCertInput{SANs: []string{""}}, `sans[0]`},
	} {
		_, _, err := c.in.Names()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestIsDNSName(t *testing.T) {
	for s, want := range map[string]bool{
		"localhost": true, "kubernetes.default.svc.cluster.local": true, "*.apps.example": true, "Node-1.Example.": true,
		"10.0.0.1": false, "a..b": false, "a b": false, "a_b.example": false, "*": false, "x.*.example": false, strings.Repeat("a", 64): false,
	} {
		if got := IsDNSName(s); got != want {
			t.Errorf("IsDNSName(%q) = %v, want %v", s, got, want)
		}
	}
}
