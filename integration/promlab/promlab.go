package promlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/integration/toolsdir"
	"kedge.dev/kedge/internal/freeport"
)

// Options configure a server.
type Options struct {
	// Rules is the rule file's YAML (Prometheus's rule groups); empty:
	// none.
	Rules string
	// Targets are the host:port addresses scraped (path /metrics), as
	// one job, "lab".
	Targets []string
	// Interval is the scrape and rule-evaluation interval (default 1s).
	Interval time.Duration
	// Parent of the server's temporary directory; empty: os.TempDir().
	Parent string
}

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string

	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	stop sync.Once
}

var tools = toolsdir.Dir{Env: "KEDGE_PROM_TOOLS", Script: "prometheus-tools.sh", What: "the Prometheus server"}

// Tools returns the directory holding the prometheus binary:
// $KEDGE_PROM_TOOLS, or else built by scripts/prometheus-tools.sh (cached
// per version).
func Tools() (string, error) { return tools.Get() }

// StartT starts a server for a test and stops it when the test ends; on
// failure it logs the tail of the server's log first.
func StartT(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("promlab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("promlab: the tail of prometheus's log:\n%s", s.logTail())
		}
		s.Stop()
	})
	return s
}

var errExited = errors.New("prometheus exited")

// Start starts a server on a free loopback port in a new temporary
// directory and waits until it is ready.
func Start(ctx context.Context, o Options) (*Server, error) {
	dir, err := Tools()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "prometheus")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus binary: %w", err)
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	// A port is free when chosen but may be taken before prometheus
	// binds it; a server that exits before it is ready is retried.
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, bin, o)
		if err == nil {
			return s, nil
		}
		if attempt == 3 || ctx.Err() != nil || !errors.Is(err, errExited) {
			return nil, err
		}
	}
}

func start(ctx context.Context, bin string, o Options) (*Server, error) {
	dir, err := os.MkdirTemp(o.Parent, "promlab-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, log: filepath.Join(dir, "prometheus.log"), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(o.Rules), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config(o)), 0o600); err != nil {
		return nil, err
	}
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	s.URL = "http://" + listen
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=info")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so Stop reaches anything it starts; killed
	// with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	if err := s.waitReady(ctx, time.Minute); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// config is prometheus.yml: the intervals, the rule file, the targets.
func config(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", o.Interval, o.Interval, o.Interval)
	b.WriteString("rule_files: [rules.yml]\n")
	if len(o.Targets) > 0 {
		quoted := make([]string, len(o.Targets))
		for i, t := range o.Targets {
			quoted[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&b, "scrape_configs:\n  - job_name: lab\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	}
	return b.String()
}

// waitReady polls /-/ready until it answers 200.
func (s *Server) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%w before it was ready: %s", errExited, s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		code, body, err := s.get(ctx, "/-/ready")
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("HTTP %d: %s", code, body)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus at %s not ready within %s (%s)\n%s", s.URL, within, last, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) get(ctx context.Context, path string) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, body, err
}

// Firing is the names of the alerts firing now, sorted, each once.
func (s *Server) Firing(ctx context.Context) ([]string, error) {
	code, body, err := s.get(ctx, "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("alerts: HTTP %d: %s", code, body)
	}
	var a struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, err
	}
	names := []string{}
	for _, al := range a.Data.Alerts {
		if n := al.Labels["alertname"]; al.State == "firing" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// WaitFiring waits until the alerts firing are exactly want (none: none).
func (s *Server) WaitFiring(ctx context.Context, within time.Duration, want ...string) error {
	slices.Sort(want)
	deadline := time.Now().Add(within)
	var got []string
	var err error
	for {
		if got, err = s.Firing(ctx); err == nil && slices.Equal(got, want) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("prometheus: firing %v, not %v, after %s (%v)", got, want, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	tail := string(b)
	if len(tail) > 3000 {
		tail = tail[len(tail)-3000:]
	}
	return tail
}

// Pid is the server process's ID.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server's process group, waits for it to exit and
// removes its directory. SIGKILL at once: nothing it holds is kept.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		_ = os.RemoveAll(s.dir)
	})
}
