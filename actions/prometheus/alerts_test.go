package prometheus

import (
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"http://prometheus:9090", "https://prometheus.monitoring.svc:9090/", "http://127.0.0.1:9090", "http://[::1]:9090"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for raw, why := range map[string]string{
		"":                                    "is not http or https",
		"prometheus:9090":                     "is not http or https",
		"ftp://prometheus:9090":               "is not http or https",
		"file:///etc/kedge/vault-token":       "is not http or https",
		"http://":                             "names no host",
		"http://:9090":                        "names no host",
		"http:prometheus":                     "names no host",
		"http://admin:s3cret@prometheus:9090": "carries user information",
		"http://admin@prometheus:9090":        "carries user information",
		"http://prometheus:9090/prometheus":   "has a path",
		"http://prometheus:9090/api/v1/query": "has a path",
		"http://prometheus:9090?x=1":          "has a query or fragment",
		"http://prometheus:9090/?":            "has a query or fragment",
		"http://prometheus:9090#top":          "has a query or fragment",
		"http://prom etheus:9090":             "does not parse",
		"http://admin:s3cret@prom etheus":     "does not parse",
	} {
		err := CheckURL(raw)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", raw, err, why)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the password: %v", raw, err)
		}
	}
}

func TestCheckNames(t *testing.T) {
	if err := CheckNames([]string{"KubeNodeNotReady", "etcdMembersDown", "job:up:ratio", "_x1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{nil, {}, {""}, {"1abc"}, {"up == 0"}, {"Node-Down"}, {"NodeDown", `x"}`}} {
		if err := CheckNames(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
