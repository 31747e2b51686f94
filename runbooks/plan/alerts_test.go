package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/runbooks"
)

// The alert gate as os-update writes it, from params: no url is no gate;
// a bad url or no names stop the run before it starts.
func TestRolloutAlerts(t *testing.T) {
	gate := runbooks.RolloutAlerts{URL: "${ params.alertsUrl }", Names: "${ params.alerts }", Recheck: "${ params.recheck }"}
	vars := func(url string, names []any, recheck string) map[string]any {
		return map[string]any{"params": map[string]any{"alertsUrl": url, "alerts": names, "recheck": recheck}}
	}
	g, err := RolloutAlerts(gate, vars("", nil, "30s"))
	if g != nil || err != nil {
		t.Errorf("no url: %+v, %v, want no gate", g, err)
	}
	g, err = RolloutAlerts(gate, vars("http://prometheus:9090", []any{"KubeNodeNotReady", "etcdMembersDown"}, "5s"))
	if err != nil || g.URL != "http://prometheus:9090" || !slices.Equal(g.Names, []string{"KubeNodeNotReady", "etcdMembersDown"}) ||
		g.Recheck != 5*time.Second || g.PauseAfter != runbooks.DefaultAlertsPauseAfter {
		t.Errorf("got %+v, %v", g, err)
	}
	for _, c := range []struct {
		url     string
		names   []any
		recheck string
		want    string
	}{
		{"http://prometheus:9090/api", []any{"NodeDown"}, "5s", "has a path"},
		{"gopher://prometheus:70", []any{"NodeDown"}, "5s", "is not http or https"},
		{"http://prometheus:9090", []any{}, "5s", "no alert names"},
		{"http://prometheus:9090", []any{"NodeDown"}, "10ms", "recheck"},
	} {
		if _, err := RolloutAlerts(gate, vars(c.url, c.names, c.recheck)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v %s: %v, want %q", c.url, c.names, c.recheck, err, c.want)
		}
	}
}
