package codec

import (
	"net/http"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Handler serves the remote codec protocol (POST /encode, POST /decode)
// for the Temporal Web UI and CLI. Browsers reach it from the UI's origin,
// so the origins given are allowed by CORS; no other origin is.
func (c *Codec) Handler(origins []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(viewer{c})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		inner.ServeHTTP(w, r)
	})
}

// viewer is the codec as the Web UI uses it: a payload that is not sealed
// (a run started by a client without the key, which no worker ran) is
// shown as it is rather than refused.
type viewer struct{ c *Codec }

func (v viewer) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return v.c.Encode(p) }

func (v viewer) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return v.c.decode(p, false)
}
