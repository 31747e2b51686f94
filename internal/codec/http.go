package codec

import (
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds a codec request's body.
const MaxRequestBytes = 4 << 20

// Handler serves the remote codec protocol's POST /decode for the
// Temporal Web UI and CLI. Browsers reach it from the UI's origin, so the
// origins given are allowed by CORS; no other origin is. Requests whose
// Host is not one of hosts are refused (a page on another site cannot
// reach it through DNS rebinding); nil hosts accepts any. /encode is not
// served: Kedge's payloads are sealed by its own clients, and an encode
// endpoint would seal anything for anyone who reaches it. Bodies are
// capped at MaxRequestBytes.
func (c *Codec) Handler(origins, hosts []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(viewer{c})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts != nil && !slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, r.Host) }) {
			http.Error(w, "unknown host", http.StatusMisdirectedRequest)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && slices.Contains(origins, o) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/decode") {
			http.Error(w, "this codec server only decodes", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		inner.ServeHTTP(w, r)
	})
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

// RequireToken lets through only requests carrying `Authorization: Bearer
// TOKEN` (compared in constant time), and CORS preflights, which browsers
// send without credentials. An authenticating proxy in front of the codec
// server adds the header; whoever goes around it is refused.
func RequireToken(token []byte, next http.Handler) http.Handler {
	want := append([]byte("Bearer "), token...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kedge codec"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
