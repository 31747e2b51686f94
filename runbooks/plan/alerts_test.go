package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
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

// os-update's waves take the inventory's alerts unless the params name
// others; ignoreAlerts drops the gate; a bad alertsUrl stops the run
// before it starts.
func TestOSUpdateTakesTheInventorysAlerts(t *testing.T) {
	cluster := testCluster(t)
	rb, children := load(t, "os-update", cluster)
	gateOf := func(params map[string]any, c *inventory.Cluster) (*AlertGate, error) {
		p, err := Compile(rb, children, params, c)
		if err != nil {
			return nil, err
		}
		for _, s := range p.Steps {
			if s.ID == "first" {
				return s.Alerts, nil
			}
		}
		t.Fatal("no step first")
		return nil, nil
	}
	if g, err := gateOf(nil, cluster); g != nil || err != nil {
		t.Errorf("no alerts anywhere: %+v, %v", g, err)
	}
	withAlerts := *cluster
	withAlerts.Alerts = &inventory.Alerts{URL: "http://prometheus.example:9090", Names: []string{"KubeNodeNotReady"}}
	g, err := gateOf(nil, &withAlerts)
	if err != nil || g == nil || g.URL != "http://prometheus.example:9090" || !slices.Equal(g.Names, []string{"KubeNodeNotReady"}) ||
		g.Recheck != 30*time.Second || g.PauseAfter != 30*time.Minute {
		t.Errorf("the inventory's: %+v, %v", g, err)
	}
	g, err = gateOf(map[string]any{"alertsUrl": "https://other.example", "alerts": "NodeDown,EtcdDown", "alertsPauseAfter": "0s"}, &withAlerts)
	if err != nil || g == nil || g.URL != "https://other.example" || !slices.Equal(g.Names, []string{"NodeDown", "EtcdDown"}) || g.PauseAfter != 0 {
		t.Errorf("the params': %+v, %v", g, err)
	}
	if g, err := gateOf(map[string]any{"ignoreAlerts": true}, &withAlerts); g != nil || err != nil {
		t.Errorf("ignoreAlerts: %+v, %v", g, err)
	}
	for _, bad := range []map[string]any{
		{"alertsUrl": "http://prometheus.example:9090/graph", "alerts": "NodeDown"},
		{"alertsUrl": "http://prometheus.example:9090"},
	} {
		if _, err := gateOf(bad, cluster); err == nil || !strings.Contains(err.Error(), "alerts") {
			t.Errorf("%v: %v, want it refused", bad, err)
		}
	}
}
