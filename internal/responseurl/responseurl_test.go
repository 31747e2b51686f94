package responseurl

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A URL is compared with the prefixes parsed, not as strings: a host that
// merely starts like Slack's, another port, credentials, plain http and a
// path that ends inside a prefix's segment are all refused.
func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		prefixes []string
		url      string
		want     bool
	}{
		{DefaultPrefixes, "https://hooks.slack.com/commands/T1/2/x", true},
		{DefaultPrefixes, "https://HOOKS.slack.com/commands/T1/2/x", true},
		{DefaultPrefixes, "https://evil.example/hooks.slack.com/", false},
		{DefaultPrefixes, "https://hooks.slack.com.evil.example/commands/x", false},
		{DefaultPrefixes, "https://hooks.slack.com:8443/commands/x", false},
		{DefaultPrefixes, "https://x@hooks.slack.com/commands/x", false},
		{DefaultPrefixes, "http://hooks.slack.com/commands/x", false},
		{DefaultPrefixes, "https://hooks.slack.com", false},
		{DefaultPrefixes, "hooks.slack.com/commands", false},
		{[]string{"https://hooks.slack.com/commands/"}, "https://hooks.slack.com/commands/1", true},
		{[]string{"https://hooks.slack.com/commands/"}, "https://hooks.slack.com/commandsx/1", false},
		{[]string{"https://hooks.slack.com"}, "https://hooks.slack.com/commands/1", false}, // not a prefix: no trailing /
		{nil, "https://hooks.slack.com/commands/1", false},
	} {
		if got := Allowed(tc.prefixes, tc.url); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.prefixes, tc.url, got, tc.want)
		}
	}
}

func TestHost(t *testing.T) {
	for u, want := range map[string]string{
		"https://hooks.slack.com/commands/T1/2/secret": "hooks.slack.com",
		"http://127.0.0.1:8080/hook":                   "127.0.0.1:8080",
		"https://hooks.slack.com":                      "hooks.slack.com",
	} {
		if got := Host(u); got != want {
			t.Errorf("Host(%q) = %q, want %q", u, got, want)
		}
	}
}

// A response_url that redirects is not followed.
func TestResponseURLRedirectsAreNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	resp, err := NoRedirects(nil, 5*time.Second).Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || hits.Load() != 0 {
		t.Errorf("status %d, the redirect's target was hit %d times", resp.StatusCode, hits.Load())
	}
}
