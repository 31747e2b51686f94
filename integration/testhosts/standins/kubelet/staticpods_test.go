package main

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// world is a static pod directory with its state and log directories and
// an image map: lab.example/sleep runs /bin/sleep, lab.example/sh /bin/sh.
type world struct {
	t                                 *testing.T
	manifests, state, logs, imagesMap string
	node                              *node
}

func newWorld(t *testing.T) *world {
	dir := t.TempDir()
	w := &world{t: t, manifests: filepath.Join(dir, "manifests"), state: filepath.Join(dir, "state"), logs: filepath.Join(dir, "logs"),
		imagesMap: writeImages(t, "lab.example/sleep /bin/sleep", "lab.example/sh /bin/sh"), node: &node{name: "n1"}}
	if err := os.MkdirAll(w.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	// Whatever a test leaves running is stopped.
	t.Cleanup(func() {
		for _, s := range readStates(w.state) {
			for _, c := range s.Containers {
				if p := adopt(c.PID, c.StartTicks, c.StartedAt); p != nil {
					p.signal(syscall.SIGKILL)
				}
			}
		}
	})
	return w
}

// kubelet is a fresh static pod manager on the world, as a (re)started
// kubelet has.
func (w *world) kubelet() *staticPods {
	var logger *log.Logger
	if testing.Verbose() {
		logger = log.New(os.Stderr, "kubelet: ", log.Lmicroseconds)
	} else {
		logger = log.New(io.Discard, "", 0)
	}
	return newStaticPods(w.manifests, w.state, w.logs, w.imagesMap, w.node, logger)
}

func (w *world) manifest(name, content string) {
	w.t.Helper()
	// Written beside and renamed, as a careful writer does: hidden files
	// are not manifests.
	tmp := filepath.Join(w.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.manifests, name)); err != nil {
		w.t.Fatal(err)
	}
}

// container returns the recorded process of a pod's container.
func (w *world) container(key, name string) containerState {
	for _, s := range readStates(w.state) {
		if podKey(s.Namespace, s.Name) == key {
			for _, c := range s.Containers {
				if c.Name == name {
					return c
				}
			}
		}
	}
	return containerState{}
}

// until syncs m until cond holds, failing after timeout.
func until(t *testing.T, m *staticPods, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m.sync()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func running(c containerState) bool { return adopt(c.PID, c.StartTicks, c.StartedAt) != nil }

func sleeper(seconds string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: kube-system}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: lab.example/sleep:1
    command: [sleep, "` + seconds + `"]
`
}

func TestStaticPodIsAdoptedRestartedOnChangeAndStoppedOnRemoval(t *testing.T) {
	w := newWorld(t)
	w.manifest("sleeper.yaml", sleeper("300"))
	first := w.kubelet()
	until(t, first, 5*time.Second, "the sleeper runs", func() bool { return running(w.container("kube-system_sleeper", "main")) })
	started := w.container("kube-system_sleeper", "main")
	if got := strings.Join(started.Argv, " "); got != "/bin/sleep 300" {
		t.Errorf("argv %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.logs, "kube-system_sleeper", "main.log")); err != nil {
		t.Errorf("log file: %v", err)
	}

	// The kubelet restarts: the next one adopts the process.
	second := w.kubelet()
	for range 3 {
		second.sync()
	}
	if c := w.container("kube-system_sleeper", "main"); c.PID != started.PID || !running(c) {
		t.Fatalf("after a kubelet restart the sleeper is pid %d (running %t), want the adopted pid %d", c.PID, running(c), started.PID)
	}
	statuses, synced := second.statuses()
	if !synced || len(statuses) != 1 || !statuses[0].containers[0].running || statuses[0].containers[0].restarts != 0 {
		t.Errorf("statuses %+v", statuses)
	}

	// The manifest changes: the old process stops, a new one starts.
	w.manifest("sleeper.yaml", sleeper("301"))
	until(t, second, 10*time.Second, "the changed sleeper runs", func() bool {
		c := w.container("kube-system_sleeper", "main")
		return c.PID != started.PID && running(c)
	})
	if running(started) {
		t.Error("the old sleeper still runs")
	}
	changed := w.container("kube-system_sleeper", "main")
	if got := strings.Join(changed.Argv, " "); got != "/bin/sleep 301" {
		t.Errorf("argv %q", got)
	}

	// The manifest is removed: the process stops, its record goes.
	if err := os.Remove(filepath.Join(w.manifests, "sleeper.yaml")); err != nil {
		t.Fatal(err)
	}
	until(t, second, 10*time.Second, "the sleeper stops", func() bool { return !running(changed) && len(readStates(w.state)) == 0 })
}

func TestAKubeletStartedLaterStopsWhatChangedMeanwhile(t *testing.T) {
	w := newWorld(t)
	w.manifest("sleeper.yaml", sleeper("300"))
	first := w.kubelet()
	until(t, first, 5*time.Second, "the sleeper runs", func() bool { return running(w.container("kube-system_sleeper", "main")) })
	old := w.container("kube-system_sleeper", "main")
	// While no kubelet runs, the manifest changes.
	w.manifest("sleeper.yaml", sleeper("302"))
	next := w.kubelet()
	until(t, next, 10*time.Second, "the changed sleeper replaces the old", func() bool {
		c := w.container("kube-system_sleeper", "main")
		return !running(old) && c.PID != old.PID && running(c)
	})
}

func TestExitedContainerRestartsWithBackoff(t *testing.T) {
	w := newWorld(t)
	w.manifest("crash.yaml", `apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - name: main
    image: lab.example/sh:1
    command: [sh, -c, "echo started $(GREETING); exit 3"]
    env: [{name: GREETING, value: hello}]
`)
	m := w.kubelet()
	until(t, m, 8*time.Second, "two restarts", func() bool { return w.container("default_crash", "main").Restarts >= 2 })
	statuses, _ := m.statuses()
	c := statuses[0].containers[0]
	if c.last == nil || c.last.code != 3 {
		t.Errorf("last termination %+v", c.last)
	}
	data, _ := os.ReadFile(filepath.Join(w.logs, "default_crash", "main.log"))
	if n := strings.Count(string(data), "started hello\n"); n < 2 {
		t.Errorf("log has %d starts: %q", n, data)
	}
}

func TestRestartPolicyNeverLeavesTheContainerExited(t *testing.T) {
	w := newWorld(t)
	w.manifest("once.yaml", `apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: lab.example/sh:1, command: [sh, -c, "exit 0"]}
`)
	m := w.kubelet()
	until(t, m, 5*time.Second, "the container finishes", func() bool {
		st, _ := m.statuses()
		return len(st) == 1 && st[0].containers[0].finished
	})
	time.Sleep(1500 * time.Millisecond)
	m.sync()
	if c := w.container("default_once", "main"); c.Restarts != 0 || c.PID != 0 {
		t.Errorf("restarted: %+v", c)
	}
}

func TestAdoptRefusesAReusedPid(t *testing.T) {
	ticks, _, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if adopt(os.Getpid(), ticks, time.Now()) == nil {
		t.Error("this process is not adopted")
	}
	if adopt(os.Getpid(), ticks+1, time.Now()) != nil {
		t.Error("a process that started at another time is adopted")
	}
	if adopt(0, 0, time.Now()) != nil {
		t.Error("pid 0 is adopted")
	}
}
