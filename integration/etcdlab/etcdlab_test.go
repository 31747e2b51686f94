package etcdlab

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// failedTB is a test that has failed: its Cleanups are kept for the test
// to run, and what it logs is kept.
type failedTB struct {
	*testing.T
	cleanups []func()
	logged   strings.Builder
}

func (f *failedTB) Cleanup(fn func())               { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Failed() bool                    { return true }
func (f *failedTB) Logf(format string, args ...any) { fmt.Fprintf(&f.logged, format, args...) }

// runCleanups runs the Cleanups registered so far, last first.
func (f *failedTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

func TestEtcdAnswersOnlyClientCertificatesAndIsGoneAfterAFailedTest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real etcd")
	}
	tb := &failedTB{T: t}
	t.Cleanup(tb.runCleanups) // should the test end before it runs them
	e := Start(tb, t.TempDir(), Options{Name: "probe"})

	e.Put(t, "/lab/key", []byte("value"))
	var got struct {
		KVs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	if err := e.Call("/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/lab/key"))}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.KVs) != 1 || got.KVs[0].Value != base64.StdEncoding.EncodeToString([]byte("value")) {
		t.Errorf("range /lab/key: %+v, want the value put", got)
	}
	for _, f := range []string{e.CAFile, e.ClientCertFile, e.ClientKeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	// Without a client certificate the handshake is refused.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.HTTP.Transport.(*http.Transport).TLSClientConfig.RootCAs}}}
	if resp, err := anon.Post(e.Endpoint+"/v3/maintenance/status", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %s", resp.Status)
	}

	tb.runCleanups()
	select {
	case <-e.done:
	default:
		t.Error("etcd still runs after the cleanup")
	}
	if _, err := os.Stat(e.dir); !os.IsNotExist(err) {
		t.Errorf("%s is left after the cleanup (%v)", e.dir, err)
	}
	if !strings.Contains(tb.logged.String(), "the tail of etcd's log") {
		t.Errorf("a failed test's cleanup logged %q, want the tail of etcd's log", tb.logged.String())
	}
}
