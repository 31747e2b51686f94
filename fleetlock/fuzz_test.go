package fleetlock

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzRequest: any method, path, Authorization and protocol header and
// body is answered without a panic, with the protocol's error value when
// not granted and with one audit line that holds no token; the
// Coordinator hears only of a request that carried the claimed node's
// token and the inventory's client ID.
func FuzzRequest(f *testing.F) {
	tokA := Token(mercuryKey, "mercury", "node-a")
	good := body(idA, "default")
	f.Add("POST", "/fleetlock/mercury/node-a/"+tokA+"/v1/pre-reboot", "", "true", []byte(good))
	f.Add("POST", "/fleetlock/mercury/node-a/v1/steady-state", "Bearer "+tokA, "true", []byte(good))
	f.Add("POST", "/fleetlock/mercury/node-b/"+tokA+"/v1/pre-reboot", "", "true", []byte(body(idB, "workers")))
	f.Add("GET", "/fleetlock/venus/node-a/"+tokA+"/v1/steady-state", "Bearer x", "", []byte("{"))
	f.Add("POST", "/fleetlock/mercury/node-a/"+tokA+"/v1/pre-reboot", "", "true", []byte(`{"client_params":{"id":"`+idA+`","group":"default"}} {}`))
	f.Add("POST", "/fleetlock//////v1/pre-reboot", "Bearer", "TRUE", []byte(`{"client_params":null}`))

	coord := &fakeCoordinator{}
	logs := &logBuffer{}
	s := newTestServer(coord, logs)
	kinds := map[string]bool{KindFailedAuth: true, KindNotFound: true, KindBadRequest: true, KindUnknownNode: true,
		KindFailedLock: true, KindFailedUnlock: true, KindBusy: true, KindInternal: true}

	f.Fuzz(func(t *testing.T, method, path, auth, header string, data []byte) {
		before := len(coord.Calls())
		logs.take()
		r := &http.Request{
			Method: method, URL: &url.URL{Path: path}, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(data)), ContentLength: int64(len(data)), RemoteAddr: "192.0.2.7:4711",
		}
		r = r.WithContext(t.Context())
		r.Header.Set("Authorization", auth)
		r.Header.Set(ProtocolHeader, header)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)

		auditLine(t, logs.take())
		if w.Code != http.StatusOK {
			var pe protocolError
			if err := json.Unmarshal(w.Body.Bytes(), &pe); err != nil || !kinds[pe.Kind] || pe.Value == "" {
				t.Fatalf("answer %d is not the protocol's error value: %q", w.Code, w.Body)
			}
		}
		calls := coord.Calls()
		if len(calls) == before {
			if w.Code == http.StatusOK {
				t.Fatalf("granted without the Coordinator: %q", path)
			}
			return
		}
		req := calls[len(calls)-1].Request
		tok := Token(keys[req.Cluster], req.Cluster, req.Node)
		if len(keys[req.Cluster]) < MinKeyLen || !(strings.Contains(path, tok) || strings.Contains(auth, tok)) {
			t.Fatalf("the Coordinator heard of a request without the token of %s/%s: %q %q", req.Cluster, req.Node, path, auth)
		}
		if info := nodes[req.Cluster+"/"+req.Node]; info.ClientID == "" || req.ClientID != info.ClientID {
			t.Fatalf("the Coordinator heard of client %q for node %s/%s", req.ClientID, req.Cluster, req.Node)
		}
	})
}
