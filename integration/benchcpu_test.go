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
	comm     string
	cpu      float64 // utime+stime, seconds
	children float64 // cutime+cstime: its children it has waited for, seconds
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
		cut, _ := strconv.ParseFloat(f[13], 64)
		cst, _ := strconv.ParseFloat(f[14], 64)
		s.procs[pid] = procTimes{comm: string(data[open+1 : closing]), cpu: (ut + st) / clockTicks, children: (cut + cst) / clockTicks}
	}
	return s
}

// cpuSince says how busy the machine was since before, and on what: the
// CPU seconds of each process name, for processes alive at both samples,
// for those started meanwhile and still running ("NAME (new)"), and for
// those that ended meanwhile, under the name of the process that waited
// for them ("under NAME": an exited process's time is added to its
// parent's when the parent reaps it). What is left ("other") ended
// under a process that ended too, or is the kernel's. The lab's hosts
// run sshd, so "under sshd" is what the steps ran on them: sudo, the
// shells, the commands.
func cpuSince(before cpuSample) string {
	after := sampleCPU()
	wall := after.at.Sub(before.at).Seconds()
	busy := after.busy - before.busy
	by := map[string]float64{}
	seen := 0.0
	for pid, a := range after.procs {
		name := a.comm
		if pid == os.Getpid() {
			name = "worker+Temporal (this process)"
		}
		b, ok := before.procs[pid]
		if !ok || b.comm != a.comm {
			// Started meanwhile: all its time (and its reaped children's)
			// is since before.
			b = procTimes{}
			name += " (new)"
		}
		by[name] += a.cpu - b.cpu
		if d := a.children - b.children; d > 0 {
			by["under "+name] += d
			seen += d
		}
		seen += a.cpu - b.cpu
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	var parts []string
	for _, n := range names[:min(8, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f s", n, by[n]))
	}
	// The machine's total is counted in ticks, each process's time more
	// finely: "other" can come out a little below zero.
	if other := busy - seen; other > 0.05 {
		parts = append(parts, fmt.Sprintf("other %.1f s", other))
	}
	return fmt.Sprintf("the machine's %d cores %.0f%% busy over %.1f s (%.1f CPU s): %s",
		runtime.NumCPU(), 100*busy/(wall*float64(runtime.NumCPU())), wall, busy, strings.Join(parts, ", "))
}
