package promlab

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Gauge is a /metrics endpoint on loopback serving gauges the test sets,
// in Prometheus's text format: a scrape target.
type Gauge struct {
	// Target is its host:port, as Options.Targets takes it.
	Target string

	mu     sync.Mutex
	values map[string]float64
}

// ServeGauges starts a /metrics endpoint for a test and closes it when
// the test ends.
func ServeGauges(t testing.TB) *Gauge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("promlab: %v", err)
	}
	g := &Gauge{Target: ln.Addr().String(), values: map[string]float64{}}
	srv := &http.Server{Handler: http.HandlerFunc(g.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return g
}

// Set sets gauge name (a metric name, no labels) to v.
func (g *Gauge) Set(name string, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.values[name] = v
}

func (g *Gauge) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	g.mu.Lock()
	var b strings.Builder
	names := make([]string, 0, len(g.values))
	for n := range g.values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s %s\n", n, n, strconv.FormatFloat(g.values[n], 'g', -1, 64))
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}
