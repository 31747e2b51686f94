package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
)

func newKeyFile(t *testing.T) (string, *Codec) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "codec.key")
	if _, err := Generate(path); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

func TestSealedPayloadsHideTheirContentAndRoundTrip(t *testing.T) {
	_, c := newKeyFile(t)
	dc := c.DataConverter()
	secret := map[string]string{"token": "abcdef.0123456789abcdef", "key": "-----BEGIN EC PRIVATE KEY-----"}
	p, err := dc.ToPayload(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("0123456789abcdef")) || bytes.Contains(p.Data, []byte("PRIVATE KEY")) {
		t.Fatal("the sealed payload holds the secret in plain text")
	}
	if string(p.Metadata["encoding"]) != Encoding || string(p.Metadata[MetadataKeyID]) != c.ActiveKey() {
		t.Errorf("metadata = %q", p.Metadata)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["token"] != secret["token"] {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestTamperedOrForeignPayloadsAreRefused(t *testing.T) {
	_, c := newKeyFile(t)
	_, other := newKeyFile(t)
	sealed, err := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decode(sealed); err == nil || !strings.Contains(err.Error(), c.ActiveKey()) {
		t.Errorf("a codec without the key: %v", err)
	}
	sealed[0].Data[len(sealed[0].Data)-1] ^= 1
	if _, err := c.Decode(sealed); err == nil {
		t.Error("a tampered payload opened")
	}
	// A payload from a client without the key is refused, whatever it
	// says; the SDK's nil value (no data) is not a payload anyone made.
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"vault":{"address":"http://evil"}}`)}
	if _, err := c.Decode([]*commonpb.Payload{plain}); !errors.Is(err, ErrUnsealed) {
		t.Errorf("an unsealed payload: %v, want ErrUnsealed", err)
	}
	forged := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}, Data: []byte("x")}
	if _, err := c.Decode([]*commonpb.Payload{forged}); !errors.Is(err, ErrUnsealed) {
		t.Errorf("a nil payload with data: %v, want ErrUnsealed", err)
	}
	null := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}}
	if out, err := c.Decode([]*commonpb.Payload{null}); err != nil || out[0] != null {
		t.Errorf("the SDK's nil value: %v", err)
	}
	// The Web UI's codec server shows an unsealed payload as it is.
	if out, err := (viewer{c}).Decode([]*commonpb.Payload{plain}); err != nil || out[0] != plain {
		t.Errorf("the viewer refused an unsealed payload: %v", err)
	}
}

func TestRotationOpensWithOldKeysAndSealsWithTheFirst(t *testing.T) {
	oldPath, old := newKeyFile(t)
	newPath, _ := newKeyFile(t)
	oldText, _ := os.ReadFile(oldPath)
	newText, _ := os.ReadFile(newPath)
	both := filepath.Join(t.TempDir(), "both.key")
	if err := os.WriteFile(both, append(newText, oldText...), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(both)
	if err != nil {
		t.Fatal(err)
	}
	sealedByOld, _ := old.Encode([]*commonpb.Payload{{Data: []byte("before rotation")}})
	out, err := c.Decode(sealedByOld)
	if err != nil || string(out[0].Data) != "before rotation" {
		t.Fatalf("old payload after rotation: %v", err)
	}
	if c.ActiveKey() == old.ActiveKey() {
		t.Error("the first line's key should seal")
	}
}

func TestKeyFileErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		text, want string
		mode       os.FileMode
	}{
		"short":  {"# c\nk1 c2hvcnQ=\n", "short:2: key k1: want 32 bytes", 0o600},
		"form":   {"just-one-field\n", "form:1: want \"ID BASE64-KEY\"", 0o600},
		"empty":  {"# nothing\n", "empty: no key", 0o600},
		"public": {"k1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "readable by others", 0o644},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tc.text), tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Generate(filepath.Join(dir, "short")); err == nil {
		t.Error("Generate overwrote an existing file")
	}
}

func TestHandlerDecodesForTheWebUI(t *testing.T) {
	_, c := newKeyFile(t)
	sealed, _ := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"open"`)}})
	body, err := json.Marshal(map[string]any{"payloads": []any{map[string]any{
		"metadata": map[string]string{"encoding": "YmluYXJ5L2VuY3J5cHRlZA==", MetadataKeyID: b64(sealed[0].Metadata[MetadataKeyID])},
		"data":     b64(sealed[0].Data),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = c.Handler([]string{"http://127.0.0.1:8233"}, LoopbackHosts(srv.Listener.Addr().String()))
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Payloads []struct{ Data string } `json:"payloads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Payloads) != 1 || got.Payloads[0].Data != b64([]byte(`"open"`)) {
		t.Fatalf("decode: status %d, %+v %v", resp.StatusCode, got, err)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:8233" {
		t.Errorf("CORS header = %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Origin", "http://evil.example")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("a foreign origin was allowed")
	}

	// Another Host (a rebinding name for this address), /encode, and a
	// body over the cap are refused.
	post := func(path, host string, body []byte) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/decode", "rebound.evil.example", body); code != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d", code)
	}
	if code := post("/encode", "", body); code != http.StatusForbidden {
		t.Errorf("/encode: %d", code)
	}
	if code := post("/decode", "", bytes.Repeat([]byte(" "), MaxRequestBytes+1)); code == http.StatusOK {
		t.Errorf("a body over the cap: %d", code)
	}
	if LoopbackHosts("0.0.0.0:8234") != nil || len(LoopbackHosts("127.0.0.1:8234")) != 3 {
		t.Error("LoopbackHosts")
	}
	// Listening on another loopback address, it answers to that one too.
	if hosts := LoopbackHosts("127.0.50.7:8234"); !slices.Contains(hosts, "127.0.50.7:8234") || slices.Contains(hosts, "127.0.50.8:8234") {
		t.Errorf("LoopbackHosts(127.0.50.7:8234) = %v", hosts)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Without a user config directory there is no default key path (never a
// shared temporary directory), and loading or making a key says so.
func TestNoDefaultPathWithoutAConfigDir(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	if p := DefaultPath(); p != "" {
		t.Fatalf("default path %q without a config directory", p)
	}
	if _, err := Load(""); !errors.Is(err, ErrNoPath) {
		t.Errorf("Load: %v", err)
	}
	if _, err := Generate(""); !errors.Is(err, ErrNoPath) {
		t.Errorf("Generate: %v", err)
	}
}

// With a token, only requests carrying it are decoded; preflights pass
// (browsers send them without credentials).
func TestRequireToken(t *testing.T) {
	reached := 0
	h := RequireToken([]byte("0123456789abcdef"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	for _, c := range []struct {
		method, auth string
		want         int
	}{
		{http.MethodPost, "", http.StatusUnauthorized},
		{http.MethodPost, "Bearer wrong", http.StatusUnauthorized},
		{http.MethodPost, "Bearer 0123456789abcdef0", http.StatusUnauthorized},
		{http.MethodPost, "0123456789abcdef", http.StatusUnauthorized},
		{http.MethodPost, "Bearer 0123456789abcdef", http.StatusOK},
		{http.MethodOptions, "", http.StatusOK},
	} {
		before := reached
		req := httptest.NewRequest(c.method, "/decode", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want || (c.want == http.StatusOK) != (reached > before) {
			t.Errorf("%s %q: %d (handler reached: %v), want %d", c.method, c.auth, rec.Code, reached > before, c.want)
		}
	}
}
