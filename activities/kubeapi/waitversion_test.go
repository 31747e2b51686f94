package kubeapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/target"
)

// After an upgrade's manifest is written, the old API server is still
// ready: the wait holds until /version answers the new release.
func TestWaitAPIServerVersionWaitsForTheNewRelease(t *testing.T) {
	var version atomic.Value
	version.Store("v1.35.4")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			fmt.Fprint(w, "ok")
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"major":"1","minor":"35","gitVersion":%q}`, version.Load())
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s := &apiServer{Server: srv}
	kc := target.Kube{Name: "mercury", Kubeconfig: workerSecret(t, t.TempDir(), "admin.conf",
		kubeconfigWith(srv.URL, "    certificate-authority-data: "+b64(s.caPEM()), "    token: t"))}
	a, _ := refusedActs()

	_, err := a.WaitAPIServer(t.Context(), kube.WaitAPIServerInput{Cluster: kc, Version: "v1.36.3", Timeout: "1s"})
	if err == nil || !strings.Contains(err.Error(), "ready, at v1.35.4 (waiting for v1.36.3)") {
		t.Fatalf("the old release counted: %v", err)
	}
	version.Store("v1.36.3")
	res, err := a.WaitAPIServer(t.Context(), kube.WaitAPIServerInput{Cluster: kc, Version: "v1.36.3", Timeout: "5s"})
	if err != nil || res.Version != "v1.36.3" {
		t.Errorf("the new release: %+v %v", res, err)
	}
}
