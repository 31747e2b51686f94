package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/starter"
)

// sealedIn collects, from JSON as the Web UI's API serves it, every
// payload the codec sealed.
func sealedIn(v any, out *[]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if md, ok := x["metadata"].(map[string]any); ok {
			if enc, _ := md["encoding"].(string); enc == base64.StdEncoding.EncodeToString([]byte(codec.Encoding)) {
				*out = append(*out, x)
				return
			}
		}
		for _, e := range x {
			sealedIn(e, out)
		}
	case []any:
		for _, e := range x {
			sealedIn(e, out)
		}
	}
}

// decodeCall posts payloads to a codec endpoint as the Web UI's page
// does; it returns the status and what came back decoded.
func decodeCall(t *testing.T, hc *http.Client, endpoint, origin, auth string, payloads []map[string]any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"payloads": payloads})
	req, err := http.NewRequest(http.MethodPost, endpoint+"/decode?preserveStorageRefs=true", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var got struct {
		Payloads []struct {
			Data string `json:"data"`
		} `json:"payloads"`
	}
	var plain strings.Builder
	if json.Unmarshal(raw, &got) == nil {
		for _, p := range got.Payloads {
			d, _ := base64.StdEncoding.DecodeString(p.Data)
			plain.Write(d)
		}
	}
	return resp.StatusCode, plain.String()
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var loginLink = regexp.MustCompile(`open (http://127\.0\.0\.1:\d+/login\?code=[0-9a-f]+) once`)

// Someone else on the machine (anyone who reaches loopback ports) reads
// a run's sealed input from `kedge dev`'s Web UI API, which needs no
// login, finds the codec endpoint in the UI's settings, and asks it to
// decode: without the token nothing is decoded, whatever Origin it
// claims; a page of another origin is refused, preflights included. The
// operator's browser, logged in once through the link kedge dev printed,
// decodes as before.
func TestCodecEndpointOfKedgeDevAnswersOnlyTheOperatorsUI(t *testing.T) {
	mainLane.join(t)
	dir := t.TempDir()
	uiAddr := freeLoopbackAddr(t)
	out := &syncLog{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *devserver.Server, 1)
	done := make(chan error, 1)
	keyFile := filepath.Join(dir, "codec.key")
	go func() {
		done <- starter.RunDev(ctx, starter.DevOptions{
			DataDir: filepath.Join(dir, "dev"), Address: "127.0.0.1:0", UIAddress: uiAddr, Namespace: "default",
			TaskQueue: "kedge-dev-codec", CodecKey: keyFile,
			Ready: func(s *devserver.Server) { ready <- s },
		}, out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var srv *devserver.Server
	select {
	case srv = <-ready:
	case err := <-done:
		t.Fatalf("kedge dev stopped: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("kedge dev did not come up:\n%s", out.String())
	}
	ui := srv.UIURL()

	// The operator starts a run whose input holds a secret.
	const secret = "operator-secret-7c1d0e"
	cd, err := codec.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	copts := client.Options{HostPort: srv.FrontendAddress(), Namespace: "default"}
	cd.Apply(&copts)
	cl, err := client.Dial(copts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "codec-attack", TaskQueue: "nobody-polls-this"}, "kedge-codec-attack", secret); err != nil {
		t.Fatal(err)
	}

	// The attacker: the UI's API hands out the sealed input and names the
	// codec endpoint.
	var history any
	getJSON(t, ui+"/api/v1/namespaces/default/workflows/codec-attack/history", &history)
	var sealed []map[string]any
	sealedIn(history, &sealed)
	if len(sealed) == 0 {
		t.Fatalf("the Web UI's API served no sealed payload: %v", history)
	}
	var settings struct {
		Codec struct {
			Endpoint           string `json:"Endpoint"`
			IncludeCredentials bool   `json:"IncludeCredentials"`
		} `json:"Codec"`
	}
	getJSON(t, ui+"/api/v1/settings", &settings)
	endpoint := settings.Codec.Endpoint
	if endpoint == "" {
		t.Fatal("the Web UI has no codec endpoint")
	}
	for _, c := range []struct{ name, origin, auth string }{
		{"no token, the UI's origin (forged)", ui, ""},
		{"no token, no origin", "", ""},
		{"a guessed bearer token", ui, "Bearer " + strings.Repeat("0", 64)},
		{"another origin", "http://evil.example", ""},
	} {
		status, plain := decodeCall(t, http.DefaultClient, endpoint, c.origin, c.auth, sealed)
		if strings.Contains(plain, secret) || status == http.StatusOK {
			t.Errorf("%s: the codec endpoint decoded (%d): %q", c.name, status, plain)
		}
	}
	// Preflights: answered for the UI's origin only.
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1"} {
		req, _ := http.NewRequest(http.MethodOptions, endpoint+"/decode", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode < 400 {
			t.Errorf("a preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}

	// The operator's browser: the link kedge dev printed (its terminal is
	// the operator's) logs it in once, and the page's calls then decode.
	if !settings.Codec.IncludeCredentials {
		t.Error("the Web UI does not send its credentials to the codec endpoint")
	}
	m := loginLink.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("kedge dev printed no login link:\n%s", out.String())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != ui+"/" {
		t.Fatalf("the login link: %d, to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, plain := decodeCall(t, browser, endpoint, ui, "", sealed); status != http.StatusOK || !strings.Contains(plain, secret) {
		t.Errorf("the operator's browser: %d %q", status, plain)
	}
	if status, plain := decodeCall(t, browser, endpoint, "http://evil.example", "", sealed); status == http.StatusOK || strings.Contains(plain, secret) {
		t.Errorf("the operator's cookie from another origin's page: %d %q", status, plain)
	}
	// The link works once: a second browser (or whoever read it later)
	// gets nothing from it.
	jar2, _ := cookiejar.New(nil)
	other := &http.Client{Jar: jar2}
	resp, err = other.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the login link used twice: %d", resp.StatusCode)
	}
	if status, _ := decodeCall(t, other, endpoint, ui, "", sealed); status == http.StatusOK {
		t.Error("the login link used twice let a second browser decode")
	}
	// The token itself (Bearer, or pasted into the login page) stays in
	// its owner-only file: kedge dev prints where, never it.
	tokenFile := filepath.Join(dir, "dev", "codec-token")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), strings.TrimSpace(string(token))) || !strings.Contains(out.String(), tokenFile) {
		t.Errorf("kedge dev printed its codec token, or not where it is:\n%s", out.String())
	}
	if status, plain := decodeCall(t, http.DefaultClient, endpoint, "", "Bearer "+strings.TrimSpace(string(token)), sealed); status != http.StatusOK || !strings.Contains(plain, secret) {
		t.Errorf("the CLI with the token (Bearer): %d %q", status, plain)
	}
}
