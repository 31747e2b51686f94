package chatops

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/runbooks/source"
)

// FuzzConfig: any ChatOps config decodes or fails with positions.
func FuzzConfig(f *testing.F) {
	for _, p := range []string{"testdata/good.yaml", "testdata/bad.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	env := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := source.Parse("chat.yaml", data)
		if err != nil || len(docs) != 1 {
			return
		}
		_, _ = decodeConfig(docs[0], t.TempDir(), env)
	})
}

// FuzzHook: the webhook's header and body parsers refuse or accept any
// request without panicking, and nothing unsigned is accepted.
func FuzzHook(f *testing.F) {
	t0 := time.Unix(1700000000, 0)
	key := []byte("alerts-secret-0123456789abcdef")
	body := []byte(`{"runbook":"cert-renewal","inventory":"mercury","params":{"threshold":"720h"},"requestId":"r1"}`)
	f.Add("alerts", SignHook(key, t0, "r1", body), "r1", "application/json", body)
	f.Add("alerts", "t=1700000000,v1=zz", "", "application/json; charset=utf-8", []byte(`{"runbook":"x"}`))
	f.Add("", "", "", "text/plain", []byte("{}"))
	cfg := func() *Config {
		os.Setenv("KEDGE_TEST_HOOK_ALERTS", string(key))
		c, err := LoadConfig("testdata/good.yaml")
		if err != nil {
			f.Fatal(err)
		}
		return c
	}()
	f.Fuzz(func(t *testing.T, keyName, sig, reqID, ctype string, data []byte) {
		h := http.Header{}
		h.Set(HeaderKey, keyName)
		h.Set(HeaderSig, sig)
		h.Set(HeaderReq, reqID)
		h.Set("Content-Type", ctype)
		v, err := verifyHook(cfg, h, data, t0)
		if err == nil && !strings.Contains(sig, hexMAC(key, t0, reqID, data)) {
			t.Fatalf("accepted a signature that is not the key's: %q (%+v)", sig, v)
		}
		r, _ := http.NewRequest("POST", "/hooks/run", bytes.NewReader(data))
		r.Header = h
		_, _ = decodeHook(r, data)
	})
}

func hexMAC(key []byte, t time.Time, reqID string, body []byte) string {
	s := SignHook(key, t, reqID, body)
	return s[strings.Index(s, "v1=")+3:]
}
