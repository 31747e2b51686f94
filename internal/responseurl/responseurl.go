package responseurl

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultPrefixes are the only places progress is posted to unless the
// config says otherwise: Slack's own response URLs.
var DefaultPrefixes = []string{"https://hooks.slack.com/"}

// Allowed says whether u falls under one of the prefixes (see
// responseURLs in the config): same scheme, same host and port, a path
// under the prefix's.
func Allowed(prefixes []string, u string) bool {
	got, err := url.Parse(u)
	if err != nil || got.User != nil || got.Opaque != "" || got.Host == "" {
		return false
	}
	for _, p := range prefixes {
		want, err := ParsePrefix(p)
		if err != nil {
			continue
		}
		if got.Scheme == want.Scheme && strings.EqualFold(got.Host, want.Host) && strings.HasPrefix(got.EscapedPath(), want.EscapedPath()) {
			return true
		}
	}
	return false
}

// ParsePrefix parses a responseURLs entry: an http(s) URL with a host and
// a path ending in "/" (so a prefix never ends inside a path segment).
func ParsePrefix(p string) (*url.URL, error) {
	u, err := url.Parse(p)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %w", p, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.User != nil:
		return nil, fmt.Errorf("%q is not an http(s) URL with a host", p)
	case !strings.HasSuffix(u.Path, "/"), u.RawQuery != "", u.Fragment != "":
		return nil, fmt.Errorf("%q must end its path with / and have no query", p)
	}
	return u, nil
}

// NoRedirects is hc (or a client with timeout) that does not follow
// redirects: a response_url was checked where it points, not where it
// sends on to.
func NoRedirects(hc *http.Client, timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if hc != nil {
		c = new(http.Client)
		*c = *hc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Host is the host (and port) of an http(s) URL, to name in logs and
// refusals without the path, which is a response_url's secret.
func Host(u string) string {
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		rest, _ = strings.CutPrefix(u, "http://")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}
