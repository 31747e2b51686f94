package codec

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds a codec request's body.
const MaxRequestBytes = 4 << 20

// MinTokenBytes is the shortest token the codec endpoint takes.
const MinTokenBytes = 16

// sessionDays is how long a browser stays logged in.
const sessionDays = 30

// EndpointOptions say whom the codec endpoint answers.
type EndpointOptions struct {
	// Token is required. A request carries it as `Authorization: Bearer
	// TOKEN` (the CLI, or an authenticating proxy in front), or comes from
	// a browser that logged in with it (or with LoginCode) at /login and
	// holds the session cookie that set.
	Token []byte
	// Origins are the Web UI's origins: the only pages answered, with CORS
	// for exactly these (preflights included); a cookie counts only on a
	// request from one of them. The first is where a login sends the
	// browser back to.
	Origins []string
	// Hosts are the Host values answered (nil: any): a page on another
	// site cannot reach the endpoint through DNS rebinding.
	Hosts []string
	// LoginCode, when set, logs one browser in, once, from a link:
	// `kedge dev` prints it to its operator.
	LoginCode string
	// SessionsNotBefore refuses every session cookie issued before it:
	// all browsers log in again (a cookie that may have leaked), while
	// the token stays.
	SessionsNotBefore time.Time
}

// Endpoint serves the remote codec protocol's POST /decode to the Web UI
// and the CLI, and /login, where a browser trades the token (or the
// one-time login code) for a session cookie.
//
// Why a cookie: the Web UI's page calls the codec endpoint itself, with
// the headers Content-Type and X-Namespace only; it adds Authorization
// only with its OIDC login on, over https, and then with the user's own
// access token. Anything the UI server could give the page (a token in
// the endpoint's URL, say) its settings API gives to anyone who reaches
// it, with no login in `kedge dev`. The cookie is the one thing only the
// operator's browser holds: the UI sends it when configured with
// includeCredentials.
//
// /encode is not served: Kedge's payloads are sealed by its own clients,
// and an encode endpoint would seal anything for anyone who reaches it.
// Bodies are capped at MaxRequestBytes.
func (c *Codec) Endpoint(o EndpointOptions) (http.Handler, error) {
	if len(o.Token) < MinTokenBytes {
		return nil, fmt.Errorf("codec endpoint: the token must be at least %d bytes", MinTokenBytes)
	}
	if len(o.Origins) == 0 {
		return nil, errors.New("codec endpoint: no Web UI origin to answer")
	}
	mac := func(purpose string) string {
		m := hmac.New(sha256.New, o.Token)
		m.Write([]byte(purpose))
		return hex.EncodeToString(m.Sum(nil))
	}
	return &endpoint{
		opts:  o,
		inner: converter.NewPayloadCodecHTTPHandler(viewer{c}),
		// Derived from the token, never it: the cookie opens this endpoint
		// only, and its name differs per token, since browsers keep cookies
		// per host, not per port (two kedge devs on one machine).
		cookie:  "kedge-codec-" + mac("kedge codec cookie name")[:8],
		key:     []byte(mac("kedge codec session v2")),
		now:     time.Now,
		revoked: map[string]time.Time{},
	}, nil
}

type endpoint struct {
	opts   EndpointOptions
	inner  http.Handler
	cookie string
	// key signs session cookies: each login gets its own, naming a random
	// ID and when it was issued; the endpoint refuses one past
	// sessionDays, issued before SessionsNotBefore, or logged out.
	key []byte
	now func() time.Time

	mu       sync.Mutex
	codeUsed bool
	revoked  map[string]time.Time // session ID -> when it would have expired
}

// newSession is a session cookie's value for one login.
func (e *endpoint) newSession() string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	msg := hex.EncodeToString(id) + "." + strconv.FormatInt(e.now().Unix(), 10)
	return msg + "." + e.sign(msg)
}

func (e *endpoint) sign(msg string) string {
	m := hmac.New(sha256.New, e.key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// session checks a cookie's value: signed by this endpoint, issued within
// sessionDays and not before SessionsNotBefore, not logged out. It
// returns the session's ID.
func (e *endpoint) session(v string) (string, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !hmac.Equal([]byte(v[i+1:]), []byte(e.sign(v[:i]))) {
		return "", false
	}
	id, at, ok := strings.Cut(v[:i], ".")
	unix, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil {
		return "", false
	}
	issued := time.Unix(unix, 0)
	if e.now().Sub(issued) > sessionDays*24*time.Hour || issued.Before(e.opts.SessionsNotBefore.Truncate(time.Second)) {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, out := e.revoked[id]; out {
		return "", false
	}
	return id, true
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if e.opts.Hosts != nil && !slices.ContainsFunc(e.opts.Hosts, func(h string) bool { return strings.EqualFold(h, r.Host) }) {
		http.Error(w, "unknown host", http.StatusMisdirectedRequest)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/decode"):
		e.decode(w, r)
	case strings.HasSuffix(r.URL.Path, "/login"):
		e.login(w, r)
	case strings.HasSuffix(r.URL.Path, "/logout"):
		e.logout(w, r)
	default:
		http.Error(w, "this codec server only decodes", http.StatusForbidden)
	}
}

func (e *endpoint) decode(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !slices.Contains(e.opts.Origins, origin) {
			http.Error(w, "this codec server answers the Temporal Web UI's pages only", http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Max-Age", "600")
		h.Set("Vary", "Origin")
	}
	switch r.Method {
	case http.MethodOptions:
		if origin == "" {
			http.Error(w, "a preflight without an Origin", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		http.Error(w, "POST payloads to decode", http.StatusMethodNotAllowed)
		return
	}
	if !e.bearer(r) && (origin == "" || !e.loggedIn(r)) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kedge codec"`)
		http.Error(w, "log in first (/login), or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	e.inner.ServeHTTP(w, r)
}

// bearer says whether r carries `Authorization: Bearer TOKEN`.
func (e *endpoint) bearer(r *http.Request) bool {
	want := append([]byte("Bearer "), e.opts.Token...)
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
}

// loggedIn says whether r carries a live session cookie.
func (e *endpoint) loggedIn(r *http.Request) bool {
	for _, c := range r.CookiesNamed(e.cookie) {
		if _, ok := e.session(c.Value); ok {
			return true
		}
	}
	return false
}

// logout ends the session r carries (POST): its cookie opens nothing from
// then on, wherever a copy of it went, and the browser's is cleared.
func (e *endpoint) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST to log out", http.StatusMethodNotAllowed)
		return
	}
	now := e.now()
	e.mu.Lock()
	for id, until := range e.revoked {
		if now.After(until) {
			delete(e.revoked, id) // expired anyway
		}
	}
	e.mu.Unlock()
	for _, c := range r.CookiesNamed(e.cookie) {
		if id, ok := e.session(c.Value); ok {
			e.mu.Lock()
			e.revoked[id] = now.Add(sessionDays * 24 * time.Hour)
			e.mu.Unlock()
		}
	}
	http.SetCookie(w, &http.Cookie{Name: e.cookie, Value: "", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}

// login shows the login form (GET), takes the token from it (POST), or
// takes the one-time code of kedge dev's link (GET ?code=); either way in
// it sets the session cookie and sends the browser back to the Web UI.
func (e *endpoint) login(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	switch r.Method {
	case http.MethodGet:
		code := r.URL.Query().Get("code")
		if code == "" {
			e.loginPage(w, http.StatusOK, "")
			return
		}
		if !e.useCode(code) {
			e.loginPage(w, http.StatusUnauthorized, "This login link was used already, or is not this server's: paste the token instead.")
			return
		}
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		token := []byte(strings.TrimSpace(r.PostFormValue("token")))
		if subtle.ConstantTimeCompare(token, e.opts.Token) != 1 {
			e.loginPage(w, http.StatusUnauthorized, "That is not the token.")
			return
		}
	default:
		h.Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	// SameSite=Strict: the Web UI's page is on the same site (another
	// port of the same host, or a sibling name), so its calls carry the
	// cookie; no other site's do. No Path: the browser scopes it to where
	// /login is, behind a proxy's prefix too.
	http.SetCookie(w, &http.Cookie{Name: e.cookie, Value: e.newSession(), MaxAge: sessionDays * 24 * 3600,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, strings.TrimRight(e.opts.Origins[0], "/")+"/", http.StatusSeeOther)
}

// useCode spends the one-time login code.
func (e *endpoint) useCode(code string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.opts.LoginCode == "" || e.codeUsed || subtle.ConstantTimeCompare([]byte(code), []byte(e.opts.LoginCode)) != 1 {
		return false
	}
	e.codeUsed = true
	return true
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kedge codec: log in</title></head>
<body>
<h1>Let this browser see decoded payloads</h1>
<p>The Temporal Web UI shows Kedge's payloads decoded through this codec server, for browsers logged in here.
Paste the codec server's token: the file given as <code>--token-file</code>, or, for <code>kedge dev</code>,
<code>codec-token</code> in its data directory (its start also prints a one-time link that does this).</p>
{{with .}}<p><strong>{{.}}</strong></p>{{end}}
<form method="post"><label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Log in</button></form>
</body></html>
`))

func (e *endpoint) loginPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, msg)
}

// LoopbackHosts are the Host values a server listening on addr (a
// loopback address) answers to; nil (any) when addr is not loopback.
func LoopbackHosts(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil
	}
	hosts := []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port), net.JoinHostPort("::1", port)}
	if own := net.JoinHostPort(host, port); !slices.Contains(hosts, own) {
		hosts = append(hosts, own) // another loopback address, such as 127.0.5.1
	}
	return hosts
}

// viewer is the codec as the Web UI uses it: a payload that is not sealed
// (a run started by a client without the key, which no worker ran) is
// shown as it is rather than refused.
type viewer struct{ c *Codec }

func (v viewer) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return v.c.Encode(p) }

func (v viewer) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return v.c.decode(p, false)
}
