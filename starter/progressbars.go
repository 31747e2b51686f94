package starter

import (
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
	v := workflows.NewView(pr, workflows.ViewOptions{Children: b.children(pr)})
	b.header.set(clipText(fmt.Sprintf("%s  %s", b.id, v.Summary), b.width-1))
	step := 0
	for _, r := range v.Rows {
		switch {
		case r.Depth == 0:
			step++
			l, ok := b.bars[r.Path]
			if !ok {
				l = b.add(r.Path, r.Path, int64(r.Total), step*100000, false)
			}
			b.track(l, r.State, int64(r.Total), int64(r.Done), clipText(stepText(r, b.id), b.textWidth()))
		case r.Kind == workflows.RowItem && r.Depth == 1:
			b.item(step, r, len(pr.Steps[step-1].Items))
		}
	}
}

// children asks for the progress of the rollout items that run: their
// bars show the steps of the item's runbook.
func (b *progressBars) children(pr workflows.Progress) map[string]workflows.Progress {
	if b.child == nil {
		return nil
	}
	out := map[string]workflows.Progress{}
	for _, s := range pr.Steps {
		for _, it := range s.Items {
			if it.State != workflows.StateRunning || it.Child == "" {
				continue
			}
			if cp, err := b.child(it.Child); err == nil {
				out[it.Child] = cp
			}
		}
	}
	return out
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

// item draws a rollout's node once it has started: the steps of its
// runbook done, and those it is on.
func (b *progressBars) item(step int, r workflows.Row, items int) {
	if r.State == workflows.StatePending {
		return
	}
	l, ok := b.bars[r.Path]
	if !ok && r.State == workflows.StateSucceeded && items > keepItems {
		return // finished between two looks: the rollout's bar counts it
	}
	total, doneCount := int64(r.Total), int64(r.Done)
	if r.Parts == nil {
		total, doneCount = 1, 0 // its runbook's steps are not known yet
	}
	text := r.State
	if len(r.Active) > 0 {
		text = "running " + strings.Join(r.Active, ", ")
	}
	if !ok {
		b.seq++
		l = b.add(r.Path, "  "+r.Item, total, step*100000+b.seq, items > keepItems)
	}
	if r.Error != "" {
		text += ": " + r.Error
	}
	if r.State != workflows.StateRunning {
		// Ended: the node's runbook is no longer asked; its bar keeps
		// the size it had.
		total, doneCount = l.total, l.bar.Current()
	}
	b.track(l, r.State, total, doneCount, clipText(text, b.textWidth()))
}

// stepText is what a step's bar says beside it.
func stepText(r workflows.Row, id string) string {
	return strings.TrimSpace(r.State+" "+r.What) + rowNotes(r, id)
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
