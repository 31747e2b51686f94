package watchdog

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Margin is how long before the -timeout deadline the watchdog fires:
// enough for a world's teardown.
const Margin = 90 * time.Second

// Start arms the watchdog for a test binary whose tests live in package
// pkg (its import path). When fewer than Margin remain of -timeout, it
// writes the running tests and their stacks to w, runs teardown (bounded
// to half the margin) and exits with status 1. It does nothing without a
// -timeout or with one shorter than twice the margin. Call after
// flag.Parse; the returned function disarms it.
func Start(pkg string, w io.Writer, teardown func()) (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout < 2*Margin {
		return func() {}
	}
	t := time.AfterFunc(timeout-Margin, func() {
		fmt.Fprintf(w, "\nwatchdog: %s of the %s -timeout passed; still running:\n%s", timeout-Margin, timeout, Report(pkg, allStacks()))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if teardown != nil {
				teardown()
			}
		}()
		select {
		case <-done:
		case <-time.After(Margin / 2):
			fmt.Fprintln(w, "watchdog: teardown did not finish in", Margin/2)
		}
		fmt.Fprintln(w, "watchdog: FAIL (timed out)")
		os.Exit(1)
	})
	return func() { t.Stop() }
}

func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Report picks, from a dump of every goroutine, those running a test of
// pkg: one line naming each test, then each such goroutine's stack.
func Report(pkg string, dump []byte) string {
	testFrame := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pkg) + `\.(Test[A-Za-z0-9_]*)(\.func[0-9.]+)?\(`)
	var names []string
	seen := map[string]bool{}
	var stacks strings.Builder
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		m := testFrame.FindSubmatch(g)
		if m == nil {
			continue
		}
		name := string(m[1])
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		stacks.Write(g)
		stacks.WriteString("\n\n")
	}
	if len(names) == 0 {
		return "  (no test goroutine found)\n"
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	b.WriteString("\n")
	b.WriteString(stacks.String())
	fmt.Fprintf(&b, "watchdog: tests running: %s\n", strings.Join(names, " "))
	return b.String()
}
