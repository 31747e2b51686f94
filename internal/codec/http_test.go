package codec

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
)

const (
	testUI    = "http://127.0.0.1:8233"
	testToken = "0123456789abcdef-codec-token"
)

// sealedBody is a /decode request body as the Web UI posts it: one
// payload sealed by c whose plain text is "open".
func sealedBody(t *testing.T, c *Codec) []byte {
	t.Helper()
	sealed, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"open"`)}})
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{}
	for k, v := range sealed[0].Metadata {
		md[k] = b64(v)
	}
	body, err := json.Marshal(map[string]any{"payloads": []any{map[string]any{"metadata": md, "data": b64(sealed[0].Data)}}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func testEndpoint(t *testing.T, code string) (*httptest.Server, []byte) {
	t.Helper()
	_, c := newKeyFile(t)
	srv := httptest.NewUnstartedServer(nil)
	h, err := c.Endpoint(EndpointOptions{Token: []byte(testToken), Origins: []string{testUI}, Hosts: LoopbackHosts(srv.Listener.Addr().String()), LoginCode: code})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, sealedBody(t, c)
}

type codecAnswer struct {
	status  int
	header  http.Header
	decoded bool // the answer holds the payload's plain text
}

func call(t *testing.T, hc *http.Client, method, u string, body []byte, header map[string]string) codecAnswer {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return codecAnswer{status: resp.StatusCode, header: resp.Header, decoded: bytes.Contains(raw, []byte(b64([]byte(`"open"`))))}
}

// What someone who reaches the codec endpoint gets without the token: a
// direct POST, with or without the Web UI's Origin, a guessed token, a
// page of another origin, a preflight from one: nothing decoded. With
// the token (Bearer, as the CLI or a proxy sends it) it decodes, and
// answers the Web UI's origin with CORS for exactly it.
func TestEndpointDecodesOnlyWithTheToken(t *testing.T) {
	srv, body := testEndpoint(t, "")
	hc := http.DefaultClient
	dec := srv.URL + "/decode"
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"nothing", nil, http.StatusUnauthorized},
		{"the UI's origin, forged", map[string]string{"Origin": testUI}, http.StatusUnauthorized},
		{"a guessed token", map[string]string{"Authorization": "Bearer 0123456789abcdef"}, http.StatusUnauthorized},
		{"the token without Bearer", map[string]string{"Authorization": testToken}, http.StatusUnauthorized},
		{"a cookie of another name", map[string]string{"Origin": testUI, "Cookie": "kedge-codec=" + testToken}, http.StatusUnauthorized},
		{"the token from another origin's page", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + testToken}, http.StatusForbidden},
		{"the token from a page of another port", map[string]string{"Origin": "http://127.0.0.1:9999", "Authorization": "Bearer " + testToken}, http.StatusForbidden},
		{"the token under a rebinding name", map[string]string{"Host": "rebound.evil.example", "Authorization": "Bearer " + testToken}, http.StatusMisdirectedRequest},
	} {
		a := call(t, hc, http.MethodPost, dec, body, c.header)
		if a.status != c.status || a.decoded {
			t.Errorf("%s: %d (decoded: %v), want %d and nothing decoded", c.name, a.status, a.decoded, c.status)
		}
		if o := a.header.Get("Access-Control-Allow-Origin"); o != "" && o != testUI {
			t.Errorf("%s: CORS allows %q", c.name, o)
		}
	}
	for _, origin := range []string{"http://evil.example", "null", ""} {
		a := call(t, hc, http.MethodOptions, dec, nil, map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
		if a.status != http.StatusForbidden || a.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("a preflight from %q: %d %v", origin, a.status, a.header)
		}
	}
	a := call(t, hc, http.MethodOptions, dec, nil, map[string]string{"Origin": testUI, "Access-Control-Request-Method": "POST"})
	if a.status != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != testUI || a.header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("the UI's preflight: %d %v", a.status, a.header)
	}
	if a := call(t, hc, http.MethodPost, dec, body, map[string]string{"Authorization": "Bearer " + testToken}); a.status != http.StatusOK || !a.decoded {
		t.Errorf("the token, as the CLI sends it: %d (decoded: %v)", a.status, a.decoded)
	}
	if a := call(t, hc, http.MethodPost, dec, body, map[string]string{"Authorization": "Bearer " + testToken, "Origin": testUI}); a.status != http.StatusOK || !a.decoded ||
		a.header.Get("Access-Control-Allow-Origin") != testUI {
		t.Errorf("the token from the UI's origin: %d (decoded: %v) %v", a.status, a.decoded, a.header)
	}
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	if a := call(t, hc, http.MethodPost, srv.URL+"/encode", body, bearer); a.status != http.StatusForbidden {
		t.Errorf("/encode: %d", a.status)
	}
	if a := call(t, hc, http.MethodPost, dec, bytes.Repeat([]byte(" "), MaxRequestBytes+1), bearer); a.status == http.StatusOK {
		t.Errorf("a body over the cap: %d", a.status)
	}
}

// The Web UI's page cannot send a token; the operator's browser logs in
// once at /login (with the token, or the one-time code of kedge dev's
// link) and the page's calls then carry the session cookie: decoded,
// from the UI's origin only. The code works once.
func TestEndpointLogsTheOperatorsBrowserIn(t *testing.T) {
	srv, body := testEndpoint(t, "one-time-code-5e2a")
	dec := srv.URL + "/decode"
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	form := func(hc *http.Client, token string) *http.Response {
		resp, err := hc.PostForm(srv.URL+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	page, err := http.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(raw), `<form method="post">`) || page.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the login page: %d %v %s", page.StatusCode, page.Header, raw)
	}

	guess := browser()
	if resp := form(guess, "0123456789abcdef"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	if resp, err := guess.Get(srv.URL + "/login?code=guess"); err != nil || resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong code: %v %v", resp, err)
	}
	if a := call(t, guess, http.MethodPost, dec, body, map[string]string{"Origin": testUI}); a.status != http.StatusUnauthorized || a.decoded {
		t.Errorf("after failed logins: %d (decoded: %v)", a.status, a.decoded)
	}

	op := browser()
	resp := form(op, testToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != testUI+"/" {
		t.Fatalf("the token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || strings.Contains(cs[0].Value, testToken) {
		t.Fatalf("the session cookie: %+v", cs)
	}
	if a := call(t, op, http.MethodPost, dec, body, map[string]string{"Origin": testUI}); a.status != http.StatusOK || !a.decoded {
		t.Errorf("the logged-in browser on the UI's page: %d (decoded: %v)", a.status, a.decoded)
	}
	// The cookie is the UI page's only: sent by a page of another origin
	// (another port of this host is the same site, so the browser would
	// send it), or by a client that sends no Origin, it opens nothing.
	for _, h := range []map[string]string{{"Origin": "http://127.0.0.1:9999"}, {}} {
		if a := call(t, op, http.MethodPost, dec, body, h); a.status == http.StatusOK || a.decoded {
			t.Errorf("the cookie with Origin %q: %d (decoded: %v)", h["Origin"], a.status, a.decoded)
		}
	}

	viaLink := browser()
	if resp, err := viaLink.Get(srv.URL + "/login?code=one-time-code-5e2a"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the one-time link: %v %v", resp, err)
	}
	if a := call(t, viaLink, http.MethodPost, dec, body, map[string]string{"Origin": testUI}); a.status != http.StatusOK || !a.decoded {
		t.Errorf("the browser the link logged in: %d (decoded: %v)", a.status, a.decoded)
	}
	late := browser()
	if resp, err := late.Get(srv.URL + "/login?code=one-time-code-5e2a"); err != nil || resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("the link used again: %v %v", resp, err)
	}
}

func TestEndpointNeedsATokenAndAnOrigin(t *testing.T) {
	_, c := newKeyFile(t)
	for _, o := range []EndpointOptions{
		{Origins: []string{testUI}},
		{Token: []byte("short"), Origins: []string{testUI}},
		{Token: []byte(testToken)},
	} {
		if _, err := c.Endpoint(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if LoopbackHosts("0.0.0.0:8234") != nil || len(LoopbackHosts("127.0.0.1:8234")) != 3 {
		t.Error("LoopbackHosts")
	}
	// Listening on another loopback address, it answers to that one too.
	if hosts := LoopbackHosts("127.0.50.7:8234"); !slices.Contains(hosts, "127.0.50.7:8234") || slices.Contains(hosts, "127.0.50.8:8234") {
		t.Errorf("LoopbackHosts(127.0.50.7:8234) = %v", hosts)
	}
}

// Written from the side of someone who got a copy of an operator's
// session cookie (a backup of a browser profile, a shared machine): each
// login has a cookie of its own, a copy of one stops working when that
// browser logs out, after 30 days whatever the cookie's Max-Age says, and
// for every browser at once when the server refuses sessions issued
// before a time; a cookie whose ID or time was changed opens nothing.
func TestEndpointSessionsAreEachLoginsOwnAndEnd(t *testing.T) {
	_, c := newKeyFile(t)
	body := sealedBody(t, c)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	serve := func(notBefore time.Time) *httptest.Server {
		h, err := c.Endpoint(EndpointOptions{Token: []byte(testToken), Origins: []string{testUI}, SessionsNotBefore: notBefore})
		if err != nil {
			t.Fatal(err)
		}
		h.(*endpoint).now = func() time.Time { return now }
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	srv := serve(time.Time{})
	loginAt := func(srv *httptest.Server) *http.Cookie {
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).PostForm(srv.URL+"/login", url.Values{"token": {testToken}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if cs := resp.Cookies(); len(cs) == 1 {
			return cs[0]
		}
		t.Fatalf("no session cookie: %v", resp.Cookies())
		return nil
	}
	login := func() *http.Cookie { return loginAt(srv) }
	with := func(srv *httptest.Server, ck *http.Cookie) codecAnswer {
		return call(t, http.DefaultClient, http.MethodPost, srv.URL+"/decode", body, map[string]string{"Origin": testUI, "Cookie": ck.Name + "=" + ck.Value})
	}
	alice, bob := login(), login()
	if alice.Value == bob.Value {
		t.Fatal("two logins got the same session cookie")
	}
	stolen := *alice
	if a := with(srv, &stolen); a.status != http.StatusOK || !a.decoded {
		t.Fatalf("a copy of a live session: %d", a.status)
	}
	for name, v := range map[string]string{
		"another ID":   strings.Repeat("0", 32) + alice.Value[32:],
		"another time": alice.Value[:33] + "9" + alice.Value[34:],
		"no signature": alice.Value[:strings.LastIndexByte(alice.Value, '.')],
	} {
		if a := with(srv, &http.Cookie{Name: alice.Name, Value: v}); a.status != http.StatusUnauthorized || a.decoded {
			t.Errorf("a cookie with %s: %d (decoded: %v)", name, a.status, a.decoded)
		}
	}

	// Alice logs out: her cookie, and every copy of it, opens nothing;
	// Bob's session goes on.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/logout", nil)
	req.AddCookie(alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %v %v", resp, err)
	}
	resp.Body.Close()
	if a := with(srv, &stolen); a.status != http.StatusUnauthorized || a.decoded {
		t.Errorf("a copy of a logged-out session: %d (decoded: %v)", a.status, a.decoded)
	}
	if a := with(srv, bob); a.status != http.StatusOK {
		t.Errorf("another browser's session after a logout: %d", a.status)
	}

	// 30 days on, the server refuses Bob's cookie whatever his browser
	// keeps.
	now = now.Add(30*24*time.Hour + time.Minute)
	if a := with(srv, bob); a.status != http.StatusUnauthorized {
		t.Errorf("a session 30 days old: %d", a.status)
	}

	// A server told to refuse sessions from before now: every earlier
	// cookie is out, a new login works.
	now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	old := login()
	now = now.Add(time.Hour)
	cut := serve(now.Add(-time.Minute))
	if a := with(cut, old); a.status != http.StatusUnauthorized {
		t.Errorf("a session from before --sessions-not-before: %d", a.status)
	}
	if a := with(cut, loginAt(cut)); a.status != http.StatusOK || !a.decoded {
		t.Errorf("a login after --sessions-not-before: %d", a.status)
	}
}
