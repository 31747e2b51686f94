package prometheus

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"kedge.dev/kedge/actions/spec"
)

// AlertsAction lists the firing alerts of a given set.
const AlertsAction = "prometheus.alerts"

// DefaultTimeout is how long one query of the alerts may take unless the
// input names another.
const DefaultTimeout = 10 * time.Second

// AlertsInput names the Prometheus server and the alerts to look for.
type AlertsInput struct {
	// URL is the server's base URL (CheckURL): the action asks its
	// /api/v1/alerts.
	URL string `json:"url" kedge:"required" doc:"the Prometheus server: http(s)://HOST[:PORT], no path, user, query or fragment"`
	// Names are the alert names (the alertname label) that count.
	Names []string `json:"names" kedge:"required" doc:"the alert names (alertname) to look for, e.g. [KubeNodeNotReady, etcdMembersDown]"`
	// Labels, when set, keep only the alerts with these label values.
	Labels map[string]string `json:"labels,omitempty" doc:"only alerts with these label values (equality), e.g. {severity: critical}"`
	// Timeout bounds one query (default DefaultTimeout).
	Timeout string `json:"timeout,omitempty" kedge:"duration" doc:"how long one query may take (default 10s)"`
}

// Alert is one firing alert.
type Alert struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// Since is when it became active (RFC 3339, Prometheus's activeAt).
	Since string `json:"since,omitempty"`
}

// AlertsResult is what fires of the set, sorted by name then labels.
type AlertsResult struct {
	Firing []Alert `json:"firing"`
	// Names are the firing alerts' names, each once, sorted.
	Names []string `json:"names"`
}

func init() {
	spec.Register(spec.Row{Name: AlertsAction,
		Doc: "list the alerts of a given set that fire in a Prometheus server (its /api/v1/alerts): name, labels and since when",
		In:  AlertsInput{}, Out: AlertsResult{}, Timeout: time.Minute,
		Summary: `ask Prometheus which of {{.Count "names" "alert"}} fire`})
}

// CheckURL checks a Prometheus base URL as the action takes it:
// http or https, a host, and nothing else: no user information (a
// password in a URL ends up in logs and histories), no path (the action
// names the API's path itself), no query or fragment.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// Not echoed: what does not parse may hold a password.
		return fmt.Errorf("the prometheus url does not parse: want http(s)://HOST[:PORT]")
	}
	bad := func(why string) error {
		// A password it carries is masked.
		return fmt.Errorf("prometheus url %q %s: want http(s)://HOST[:PORT]", u.Redacted(), why)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("is not http or https")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "" || strings.ContainsAny(raw, " \t\r\n"):
		return bad("names no host")
	case u.User != nil:
		return bad("carries user information")
	case u.Path != "" && u.Path != "/":
		return bad("has a path")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return bad("has a query or fragment")
	}
	return nil
}

// CheckNames checks the alert names of a query: at least one, each a
// Prometheus metric-style name.
func CheckNames(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("no alert names: name the alerts that count (e.g. [KubeNodeNotReady, etcdMembersDown])")
	}
	for _, n := range names {
		if !validName(n) {
			return fmt.Errorf("alert name %q is not a Prometheus name ([a-zA-Z_:][a-zA-Z0-9_:]*)", n)
		}
	}
	return nil
}

func validName(n string) bool {
	if n == "" || len(n) > 200 {
		return false
	}
	for i, r := range n {
		switch {
		case r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
