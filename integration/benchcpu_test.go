package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the machine's CPU time (all cores) and each process's, by
// PID, at one moment: what a rollout's row says the machine spent its
// cores on.
type cpuSample struct {
	at         time.Time
	busy, idle float64           // seconds, all cores (/proc/stat)
	procs      map[int]procTimes // by PID
}

type procTimes struct {
	comm string
	cpu  float64 // utime+stime, seconds
}

// clockTicks is USER_HZ, 100 on every Linux Kedge's test world runs on.
const clockTicks = 100

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), procs: map[int]procTimes{}}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			n, _ := strconv.ParseFloat(v, 64)
			if i == 3 || i == 4 { // idle, iowait
				s.idle += n / clockTicks
			} else if i < 8 { // user nice system irq softirq steal
				s.busy += n / clockTicks
			}
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, closing := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(string(data[closing+1:]))
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		s.procs[pid] = procTimes{comm: string(data[open+1 : closing]), cpu: (ut + st) / clockTicks}
	}
	return s
}

// cpuSince says how busy the machine was since before, and on what: the
// CPU seconds of each process name (processes alive at both samples;
// what started or ended between is in "other").
func cpuSince(before cpuSample) string {
	after := sampleCPU()
	wall := after.at.Sub(before.at).Seconds()
	busy := after.busy - before.busy
	by := map[string]float64{}
	seen := 0.0
	for pid, a := range after.procs {
		if b, ok := before.procs[pid]; ok && b.comm == a.comm {
			d := a.cpu - b.cpu
			name := a.comm
			if pid == os.Getpid() {
				name = "worker+Temporal (this process)"
			}
			by[name] += d
			seen += d
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	var parts []string
	for _, n := range names[:min(5, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f s", n, by[n]))
	}
	parts = append(parts, fmt.Sprintf("other (processes started or ended meanwhile: kubelets restarted, sudo, shells) %.1f s", busy-seen))
	return fmt.Sprintf("the machine's %d cores %.0f%% busy over %.1f s (%.1f CPU s): %s",
		runtime.NumCPU(), 100*busy/(wall*float64(runtime.NumCPU())), wall, busy, strings.Join(parts, ", "))
}
