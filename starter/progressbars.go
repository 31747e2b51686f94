package starter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"kedge.dev/kedge/workflows"
)

// progressView shows a run's progress as it changes: bars in a terminal,
// one line per change anywhere else (a CI log, a pipe, --output json).
type progressView interface {
	update(workflows.Progress)
	// close stops drawing; what is printed after it goes below the bars.
	close()
}

// newProgressView picks bars when w is a terminal and text is wanted.
// child answers the progress query of a rollout item's workflow.
func newProgressView(w io.Writer, text bool, id string, child func(id string) (workflows.Progress, error)) progressView {
	if text && isTerminal(w) {
		width := 100
		if f, ok := w.(*os.File); ok {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				width = cols
			}
		}
		return newProgressBars(id, width, child, mpb.WithOutput(w))
	}
	return newProgressPrinter(w, text, id)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

func (p *progressPrinter) close() {}

// progressBars draws a bar per step (hosts done of a fan-out step, items
// done of a rollout) and, under a rollout, a bar per node: the steps its
// runbook has done, and the one it is on.
type progressBars struct {
	p      *mpb.Progress
	id     string
	width  int
	child  func(id string) (workflows.Progress, error)
	header *liveBar
	bars   map[string]*liveBar // step id, or step/item
	seq    int
	closed bool
}

// liveBar is one bar and the text beside it, which the drawing goroutine
// reads.
type liveBar struct {
	bar   *mpb.Bar
	mu    sync.Mutex
	text  string
	total int64
	done  bool
}

func (l *liveBar) set(text string) {
	l.mu.Lock()
	l.text = text
	l.mu.Unlock()
}

func (l *liveBar) get(decor.Statistics) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text
}

// keepItems: a rollout over more items drops the bars of the nodes that
// succeeded, so the terminal shows what runs and what failed.
const keepItems = 20

func newProgressBars(id string, width int, child func(string) (workflows.Progress, error), opts ...mpb.ContainerOption) *progressBars {
	b := &progressBars{p: mpb.New(append([]mpb.ContainerOption{mpb.WithWidth(24)}, opts...)...), id: id, width: width, child: child, bars: map[string]*liveBar{}}
	b.header = &liveBar{text: id}
	b.header.bar = b.p.New(0, mpb.NopStyle(), mpb.BarPriority(-1), mpb.PrependDecorators(decor.Any(b.header.get)))
	return b
}

// line is the room left for a bar's text.
func (b *progressBars) textWidth() int { return max(20, b.width-24-2-22-10) }

func (b *progressBars) add(key, label string, total int64, priority int, removeOnDone bool) *liveBar {
	l := &liveBar{total: max(total, 1)}
	opts := []mpb.BarOption{
		mpb.BarPriority(priority),
		mpb.PrependDecorators(decor.Name(clipText(label, 22), decor.WCSyncSpaceR)),
		mpb.AppendDecorators(decor.CountersNoUnit(" %d/%d "), decor.Any(l.get)),
	}
	if removeOnDone {
		opts = append(opts, mpb.BarRemoveOnComplete())
	}
	// Built with no total, a bar ends only when told (SetTotal with
	// complete, Abort), never because its count reached the total.
	l.bar = b.p.New(0, mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding(" ").Rbound("]"), opts...)
	l.bar.SetTotal(l.total, false)
	b.bars[key] = l
	return l
}

func (b *progressBars) update(pr workflows.Progress) {
	if b.closed {
		return
	}
	b.header.set(clipText(fmt.Sprintf("%s  %s", b.id, pr.State), b.width-1))
	for i, s := range pr.Steps {
		total, doneCount := stepCounts(s)
		l, ok := b.bars[s.ID]
		if !ok {
			l = b.add(s.ID, s.ID, total, (i+1)*100000, false)
		}
		b.track(l, s.State, total, doneCount, clipText(stepText(s, b.id), b.textWidth()))
		if len(s.Items) > 0 {
			b.items(i, s)
		}
	}
}

// track moves a bar to where its step is, and ends it with the step.
func (b *progressBars) track(l *liveBar, state string, total, doneCount int64, text string) {
	l.set(text)
	if l.done {
		return
	}
	if total = max(total, 1); l.total != total || l.bar.Current() != doneCount {
		l.total = total
		l.bar.SetTotal(total, false)
		l.bar.SetCurrent(doneCount)
	}
	switch state {
	case workflows.StateSucceeded, workflows.StateSkipped:
		l.done = true
		l.bar.SetTotal(total, true)
	case workflows.StateFailed, workflows.StateCancelled, workflows.StateNotRun:
		l.done = true
		l.bar.Abort(false)
	}
}

// items draws a rollout's nodes that have started: per node, the steps of
// its runbook done and the one running.
func (b *progressBars) items(stepIndex int, s workflows.StepProgress) {
	for _, it := range s.Items {
		if it.State == workflows.StatePending {
			continue
		}
		key := s.ID + "/" + it.ID
		l, ok := b.bars[key]
		if !ok && it.State == workflows.StateSucceeded && len(s.Items) > keepItems {
			continue // finished between two looks: the rollout's bar counts it
		}
		var cp workflows.Progress
		var err error = errNoChild
		if it.State == workflows.StateRunning && it.Child != "" && b.child != nil {
			cp, err = b.child(it.Child)
		}
		total, doneCount := int64(1), int64(0)
		text := it.State
		if err == nil && len(cp.Steps) > 0 {
			total, doneCount = int64(len(cp.Steps)), 0
			var on []string
			for _, cs := range cp.Steps {
				switch cs.State {
				case workflows.StateSucceeded, workflows.StateSkipped:
					doneCount++
				case workflows.StateRunning, workflows.StateWaiting:
					on = append(on, cs.ID)
				}
			}
			if len(on) > 0 {
				text = "running " + strings.Join(on, ", ")
			}
		}
		if !ok {
			b.seq++
			l = b.add(key, "  "+it.ID, total, (stepIndex+1)*100000+b.seq, len(s.Items) > keepItems)
		}
		if it.LastError != "" {
			text += ": " + it.LastError
		}
		if it.State != workflows.StateRunning {
			// Ended: the node's runbook is no longer asked; its bar keeps
			// the size it had.
			total, doneCount = l.total, l.bar.Current()
		}
		b.track(l, it.State, total, doneCount, clipText(text, b.textWidth()))
	}
}

var errNoChild = errors.New("no child progress")

// stepCounts: a bar's total and how much of it is done.
func stepCounts(s workflows.StepProgress) (total, done int64) {
	switch {
	case len(s.Items) > 0:
		for _, it := range s.Items {
			if it.State == workflows.StateSucceeded || it.State == workflows.StateFailed {
				done++
			}
		}
		return int64(len(s.Items)), done
	case len(s.Hosts) > 0:
		for _, h := range s.Hosts {
			if h.State == workflows.StateSucceeded {
				done++
			}
		}
		return int64(len(s.Hosts)), done
	}
	if s.State == workflows.StateSucceeded || s.State == workflows.StateSkipped {
		return 1, 1
	}
	return 1, 0
}

// stepText is what a step's bar says beside it.
func stepText(s workflows.StepProgress, id string) string {
	var b strings.Builder
	b.WriteString(s.State)
	switch s.Kind {
	case "rollout":
		fmt.Fprintf(&b, " rollout %s", s.Child)
	case "runbook":
		fmt.Fprintf(&b, " runbook %s", s.Child)
	case "approval":
		if s.State == workflows.StateWaiting {
			fmt.Fprintf(&b, " — kedge approve %s --step %s", id, s.ID)
		}
	default:
		if s.Action != "" {
			b.WriteString(" " + s.Action)
		}
	}
	if s.Paused {
		fmt.Fprintf(&b, " — PAUSED: kedge approve %s --decision continue|abort", id)
	}
	if s.Attempts > 1 {
		fmt.Fprintf(&b, " (attempt %d)", s.Attempts)
	}
	if s.LastError != "" && (s.State == workflows.StateFailed || s.State == workflows.StateRunning) {
		b.WriteString(": " + s.LastError)
	}
	if s.Undo != "" {
		fmt.Fprintf(&b, " (undo %s)", s.Undo)
	}
	return b.String()
}

// close ends every bar still drawn and waits for the last frame.
func (b *progressBars) close() {
	if b.closed {
		return
	}
	b.closed = true
	b.header.bar.SetTotal(1, true)
	for _, l := range b.bars {
		if !l.done {
			l.done = true
			l.bar.Abort(false)
		}
	}
	b.p.Wait()
}

func clipText(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	r := []rune(s)
	if n < 2 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
