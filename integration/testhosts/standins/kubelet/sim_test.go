package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/integration/gobin"
)

// The integration tests run the simulator as a child process on these
// loopback addresses (other packages' tests use 127.0.20.x–127.0.30.x).
const (
	bootstrapNodeIP = "127.0.41.1" // TestTLSBootstrapRegistrationAndServing's kubelet
	etcdIP          = "127.0.41.2" // TestStaticEtcd's etcd
	etcdNodeIP      = "127.0.41.3" // TestStaticEtcd's kubelet
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// simBinary builds the simulator once per test process, as the test
// hosts build it (CGO_ENABLED=0), where the next run finds it built.
func simBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtBin, buildErr = gobin.Build("kedge.dev/kedge/integration/testhosts/standins/kubelet", "CGO_ENABLED=0")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// sim is the simulator running as a child process, its output in a file.
type sim struct {
	t    *testing.T
	bin  string
	args []string
	env  []string
	out  string
	cmd  *exec.Cmd
	done chan struct{}
}

// newSim makes a simulator started with args (the kubelet's flags) and
// env. Its CNI config directory is dir/net.d, holding a network unless env
// names another directory (KEDGE_LAB_CNI_CONF_DIR).
func newSim(t *testing.T, dir string, env []string, args ...string) *sim {
	cniDir := filepath.Join(dir, "net.d")
	writeFile(t, filepath.Join(cniDir, "10-bridge.conflist"), testConflist, 0o644)
	env = append([]string{"KEDGE_LAB_CNI_CONF_DIR=" + cniDir}, env...)
	s := &sim{t: t, bin: simBinary(t), args: args, env: env, out: filepath.Join(dir, "kubelet-sim.log")}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() || testing.Verbose() {
			data, _ := os.ReadFile(s.out)
			t.Logf("kubelet simulator output:\n%s", data)
		}
	})
	return s
}

func (s *sim) start() {
	s.t.Helper()
	f, err := os.OpenFile(s.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
}

// stop stops the simulator as systemd does, with SIGTERM.
func (s *sim) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Error("the simulator ignored SIGTERM for 10s")
	}
	s.cmd = nil
}

// output is what the simulator printed so far.
func (s *sim) output() string {
	data, _ := os.ReadFile(s.out)
	return string(data)
}

// waitOutput waits until the simulator's output holds want n times.
func (s *sim) waitOutput(want string, n int, timeout time.Duration) {
	s.t.Helper()
	eventually(s.t, timeout, fmt.Sprintf("the simulator prints %q %d times", want, n), func() error {
		if strings.Count(s.output(), want) < n {
			return fmt.Errorf("printed %d times", strings.Count(s.output(), want))
		}
		return nil
	})
}

// eventually retries check until it returns nil, failing after timeout
// with its last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %s, %s: %v", timeout, what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killStaticPods kills what static pods a simulator with root dir root
// left running.
func killStaticPods(root string) {
	for _, s := range readStates(filepath.Join(root, staticPodStateDir)) {
		for _, c := range s.Containers {
			if p := adopt(c.PID, c.StartTicks, c.StartedAt); p != nil {
				p.signal(syscall.SIGKILL)
			}
		}
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
