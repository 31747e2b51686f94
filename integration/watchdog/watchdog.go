package watchdog

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Margin is how long before the -timeout deadline the watchdog fires:
// enough for a world's teardown.
const Margin = 90 * time.Second

// Start arms the watchdog for a test binary whose tests live in package
// pkg (its import path). When fewer than Margin remain of -timeout, or
// when the binary is interrupted (SIGINT, SIGTERM: a Ctrl-C, a CI job
// cancelled), it writes the running tests and their stacks to w, runs
// teardown (bounded to half the margin) and exits with status 1: a world
// of servers, namespaces and cgroups is never left running behind a test
// binary that was stopped. The timeout part does nothing without a
// -timeout or with one shorter than twice the margin. Call after
// flag.Parse; the returned function disarms it.
func Start(pkg string, w io.Writer, teardown func()) (stop func()) {
	var once sync.Once
	end := func(why, verdict string) {
		once.Do(func() {
			fmt.Fprintf(w, "\nwatchdog: %s; still running:\n%s", why, Report(pkg, allStacks()))
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
			fmt.Fprintf(w, "watchdog: FAIL (%s)\n", verdict)
			os.Exit(1)
		})
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			end(fmt.Sprintf("%v received", s), "interrupted")
		case <-quit:
		}
	}()
	var timer *time.Timer
	if timeout, ok := testTimeout(); ok && timeout >= 2*Margin {
		timer = time.AfterFunc(timeout-Margin, func() {
			end(fmt.Sprintf("%s of the %s -timeout passed", timeout-Margin, timeout), "timed out")
		})
	}
	var disarm sync.Once
	return func() {
		disarm.Do(func() {
			signal.Stop(sigs)
			close(quit)
			if timer != nil {
				timer.Stop()
			}
		})
	}
}

// testTimeout is the binary's -test.timeout, when it has one.
func testTimeout() (time.Duration, bool) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0, false
	}
	timeout, err := time.ParseDuration(f.Value.String())
	return timeout, err == nil && timeout > 0
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
