package starter

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kedge.dev/kedge/workflows"
)

// openPTY opens a pseudo-terminal: the program writes to tty, the test
// reads what a terminal would show from pty.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(pty.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 140}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close(); pty.Close() })
	return pty, tty
}

// swapProgress is a kubelet swap's progress: a check done, a rollout over
// three nodes (one done, one running its fourth of six steps, one pending)
// and an approval to come.
func swapProgress(state string) workflows.Progress {
	items := []workflows.StepProgress{
		{ID: "worker-1", State: workflows.StateSucceeded, Child: "mercury/node/worker-1"},
		{ID: "worker-2", State: workflows.StateRunning, Child: "mercury/node/worker-2"},
		{ID: "worker-3", State: workflows.StatePending},
	}
	rollout := workflows.StateRunning
	if state == workflows.StateSucceeded {
		rollout = state
		items[1].State, items[2].State = workflows.StateSucceeded, workflows.StateSucceeded
		items[2].Child = "mercury/node/worker-3"
	}
	return workflows.Progress{WorkflowID: "kubelet-image-swap/mercury/x", State: state, Steps: []workflows.StepProgress{
		{ID: "check", Kind: "action", Action: "kedge.check", State: workflows.StateSucceeded},
		{ID: "workers", Kind: "rollout", State: rollout, Child: "kubelet-image-swap/mercury/x/workers", Items: items},
		{ID: "gate", Kind: "approval", State: workflows.StatePending},
	}}
}

// nodeProgress answers for a node's runbook: four of six steps done, drain
// running.
func nodeProgress(id string) (workflows.Progress, error) {
	p := workflows.Progress{WorkflowID: id, State: workflows.StateRunning}
	for i, s := range []string{"cordon", "drain", "dropin", "restart", "wait", "uncordon"} {
		st := workflows.StatePending
		switch {
		case i < 4:
			st = workflows.StateSucceeded
		case i == 4:
			st = workflows.StateRunning
		}
		p.Steps = append(p.Steps, workflows.StepProgress{ID: s, State: st})
	}
	return p, nil
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func TestWatchDrawsBarsPerNodeInATerminal(t *testing.T) {
	pty, tty := openPTY(t)
	var screen bytes.Buffer
	var mu sync.Mutex
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := pty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	v := newProgressView(tty, true, "kubelet-image-swap/mercury/x", nodeProgress)
	bars, ok := v.(*progressBars)
	if !ok {
		t.Fatalf("a terminal got %T, want bars", v)
	}
	bars.update(swapProgress(workflows.StateRunning))
	time.Sleep(500 * time.Millisecond) // a frame or more is drawn
	bars.update(swapProgress(workflows.StateSucceeded))
	bars.close()
	tty.Close()
	<-read
	mu.Lock()
	out := ansi.ReplaceAllString(screen.String(), "")
	mu.Unlock()
	for _, want := range []string{
		"kubelet-image-swap/mercury/x  succeeded",
		"check", "workers", "3/3",
		"  worker-2", "4/6", "running wait",
		"gate", "kedge.check",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal never showed %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`worker-2\s+\[=+\]\s+6/6\s+succeeded`).MatchString(out) {
		t.Errorf("worker-2's bar did not end full:\n%s", out)
	}
}

// Anything but a terminal gets the lines it always got.
func TestWatchPrintsLinesWhenNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, out := range []io.Writer{&strings.Builder{}, w} {
		if v := newProgressView(out, true, "id", nodeProgress); func() bool { _, ok := v.(*progressPrinter); return !ok }() {
			t.Errorf("%T got %T, want lines", out, v)
		}
	}
	w.Close()
	var b strings.Builder
	v := newProgressView(&b, true, "kubelet-image-swap/mercury/x", nodeProgress)
	v.update(swapProgress(workflows.StateRunning))
	v.close()
	for _, want := range []string{"check                succeeded  kedge.check", "workers/worker-1", "running    runbook mercury/node/worker-2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lines lack %q:\n%s", want, b.String())
		}
	}
}

func TestClipText(t *testing.T) {
	if got := clipText("drain worker-2\nnext", 10); got != "drain wor…" {
		t.Errorf("clipText = %q", got)
	}
	if got := clipText("short", 10); got != "short" {
		t.Errorf("clipText = %q", got)
	}
}
