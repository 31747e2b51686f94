package promapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/prometheus"
)

const answer2 = `{"status":"success","data":{"alerts":[
 {"labels":{"alertname":"NodeDown","instance":"worker-2","severity":"critical"},"annotations":{},"state":"firing","activeAt":"2026-12-05T02:00:01Z","value":"1e+00"},
 {"labels":{"alertname":"NodeDown","instance":"worker-1","severity":"warning"},"annotations":{},"state":"firing","activeAt":"2026-12-05T02:00:00Z","value":"1e+00"},
 {"labels":{"alertname":"EtcdDown","severity":"critical"},"state":"pending","activeAt":"2026-12-05T02:00:00Z"},
 {"labels":{"alertname":"Watchdog","severity":"none"},"state":"firing","activeAt":"2026-12-05T01:00:00Z"}
]}}`

func TestFiringKeepsTheNamedFiringAlerts(t *testing.T) {
	res, err := Firing(200, []byte(answer2), []string{"NodeDown", "EtcdDown"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Watchdog is not named; EtcdDown is pending, not firing.
	if !slices.Equal(res.Names, []string{"NodeDown"}) || len(res.Firing) != 2 {
		t.Fatalf("got %+v", res)
	}
	if f := res.Firing[0]; f.Labels["instance"] != "worker-1" || f.Since != "2026-12-05T02:00:00Z" {
		t.Errorf("first = %+v, want worker-1's (sorted by labels)", f)
	}
	res, err = Firing(200, []byte(answer2), []string{"NodeDown"}, map[string]string{"severity": "critical"})
	if err != nil || len(res.Firing) != 1 || res.Firing[0].Labels["instance"] != "worker-2" {
		t.Errorf("with severity=critical: %+v, %v", res, err)
	}
	res, err = Firing(200, []byte(`{"status":"success","data":{"alerts":[]}}`), []string{"NodeDown"}, nil)
	if err != nil || res.Firing == nil || res.Names == nil || len(res.Names) != 0 {
		t.Errorf("none firing: %+v, %v (want empty lists, not null)", res, err)
	}
}

func TestFiringRefusesWhatIsNotTheAlertsAPI(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{200, `<html>Grafana</html>`},
		{200, `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{200, `{"status":"error","errorType":"bad_data","error":"x"}`},
		{404, `{"status":"error","errorType":"not_found","error":"x"}`},
		{200, `{}`},
	} {
		if _, err := Firing(c.status, []byte(c.body), []string{"NodeDown"}, nil); !errors.Is(err, ErrNotAlertsAPI) {
			t.Errorf("%d %s: %v", c.status, c.body, err)
		}
	}
}

// serve answers /api/v1/alerts with status and body, and anything else
// with 404; it records the paths asked.
func serve(t *testing.T, status int, body string) (*httptest.Server, *[]string) {
	var paths []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		if r.URL.Path != "/api/v1/alerts" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s, &paths
}

func typeOf(err error) (string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return "", false
	}
	return app.Type(), app.NonRetryable()
}

func TestAlertsClassifiesItsErrors(t *testing.T) {
	ctx := context.Background()
	a := &Activities{}
	ok, paths := serve(t, 200, answer2)
	res, err := a.Alerts(ctx, prometheus.AlertsInput{URL: ok.URL + "/", Names: []string{"NodeDown"}})
	if err != nil || !slices.Equal(res.Names, []string{"NodeDown"}) || !slices.Equal(*paths, []string{"/api/v1/alerts"}) {
		t.Fatalf("got %+v, %v, asked %v", res, err, *paths)
	}
	down, _ := serve(t, 503, "overloaded")
	refusing, _ := serve(t, 401, "Unauthorized")
	redirect := httptest.NewServer(http.RedirectHandler(ok.URL+"/api/v1/alerts", http.StatusFound))
	t.Cleanup(redirect.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name, url string
		names     []string
		timeout   string
		typ       string
		final     bool
	}{
		{"connection refused", closed, []string{"NodeDown"}, "", errtype.PrometheusUnreachable, false},
		{"a 5xx", down.URL, []string{"NodeDown"}, "", errtype.PrometheusUnreachable, false},
		{"a 4xx", refusing.URL, []string{"NodeDown"}, "", errtype.PrometheusRefused, true},
		{"a redirect, not followed", redirect.URL, []string{"NodeDown"}, "", errtype.PrometheusRefused, true},
		{"a path", ok.URL + "/api/v1/query", []string{"NodeDown"}, "", errtype.InvalidInput, true},
		{"user information", strings.Replace(ok.URL, "http://", "http://u:p@", 1), []string{"NodeDown"}, "", errtype.InvalidInput, true},
		{"no names", ok.URL, nil, "", errtype.InvalidInput, true},
		{"a bad timeout", ok.URL, []string{"NodeDown"}, "-1s", errtype.InvalidInput, true},
	} {
		_, err := a.Alerts(ctx, prometheus.AlertsInput{URL: c.url, Names: c.names, Timeout: c.timeout})
		typ, final := typeOf(err)
		if typ != c.typ || final != c.final {
			t.Errorf("%s: %v: type %q final %v, want %q final %v", c.name, err, typ, final, c.typ, c.final)
		}
	}
	if len(*paths) != 1 {
		t.Errorf("the redirect was followed: the alerts were asked %d times", len(*paths))
	}
}
