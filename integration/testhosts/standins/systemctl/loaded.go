package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// What systemd has loaded: a unit's files as they were when it was first
// loaded or at the last daemon-reload, kept in loadedDir. Starting,
// stopping and showing a unit use these, not the files on disk, so a
// changed unit file or drop-in counts only after a daemon-reload.
//
// systemd unloads a unit nothing holds (inactive, not failed, not
// enabled) and reads it afresh the next time; the stand-in does the same.

func loadedDir() string             { return filepath.Join(stateDir, "loaded") }
func loadedFile(name string) string { return filepath.Join(loadedDir(), name+".json") }

// keepsLoaded reports whether systemd would still hold the unit in memory.
func keepsLoaded(name string) bool {
	if s := activeState(name); s == "active" || s == "failed" {
		return true
	}
	return enabled(name)
}

// holdLoaded is set while one command works on a unit (restart is one
// job: the unit is not unloaded between its stop and its start).
var holdLoaded = map[string]bool{}

func readLoaded(name string) ([]unitFile, bool) {
	data, err := os.ReadFile(loadedFile(name))
	if err != nil {
		return nil, false
	}
	var files []unitFile
	if json.Unmarshal(data, &files) != nil {
		return nil, false
	}
	return files, true
}

func writeLoaded(name string, files []unitFile) error {
	if err := os.MkdirAll(loadedDir(), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(files)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d", loadedFile(name), os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, loadedFile(name))
}

// loadUnit is the unit as systemd has it loaded, loading it from disk if
// it is not.
func loadUnit(name string) (*unit, error) {
	files, ok := readLoaded(name)
	if ok && !holdLoaded[name] && !keepsLoaded(name) {
		ok = false
	}
	if !ok {
		var err error
		if files, err = unitFiles(name); err != nil {
			_ = os.Remove(loadedFile(name))
			return nil, err
		}
		if err := writeLoaded(name, files); err != nil {
			return nil, err
		}
	}
	holdLoaded[name] = true
	return parseUnit(name, files), nil
}

// needsReload reports whether the unit's files on disk differ from the
// loaded ones.
func needsReload(name string) bool {
	files, ok := readLoaded(name)
	if !ok || !holdLoaded[name] && !keepsLoaded(name) {
		return false
	}
	disk, err := unitFiles(name)
	if err != nil {
		return true
	}
	return !reflect.DeepEqual(files, disk)
}

// warnIfChanged prints systemd's warning about a unit changed on disk.
func warnIfChanged(name string) {
	if needsReload(name) {
		fmt.Fprintf(os.Stderr, "Warning: The unit file, source configuration file or drop-ins of %s changed on disk. Run 'systemctl daemon-reload' to reload units.\n", name)
	}
}

// daemonReload loads every loaded unit again from disk.
func daemonReload() int {
	entries, _ := os.ReadDir(loadedDir())
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		files, err := unitFiles(name)
		if err != nil {
			_ = os.Remove(loadedFile(name))
			continue
		}
		if err := writeLoaded(name, files); err != nil {
			return fail("Failed to reload daemon: %v", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "daemon-reloads"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano))
		f.Close()
	}
	return 0
}

const systemDir = "/etc/systemd/system"

// installLinks are the links enabling the unit makes: TARGET.wants/UNIT
// for WantedBy=, TARGET.requires/UNIT for RequiredBy=.
func installLinks(u *unit) []string {
	var out []string
	for _, t := range u.WantedBy {
		out = append(out, filepath.Join(systemDir, t+".wants", u.Name))
	}
	for _, t := range u.RequiredBy {
		out = append(out, filepath.Join(systemDir, t+".requires", u.Name))
	}
	return out
}

// enabledLinks are the links that enable the unit now.
func enabledLinks(name string) []string {
	var out []string
	for _, pattern := range []string{"*.wants", "*.requires"} {
		m, _ := filepath.Glob(filepath.Join(systemDir, pattern, name))
		out = append(out, m...)
	}
	return out
}

func enabled(name string) bool { return len(enabledLinks(name)) > 0 }

// enable makes (on) or removes the unit's [Install] links, then reloads
// the daemon, as systemctl does.
func enable(name string, on bool) int {
	files, err := unitFiles(name)
	if err != nil {
		return fail("Failed to %s unit: Unit file %s does not exist.", map[bool]string{true: "enable", false: "disable"}[on], name)
	}
	u := parseUnit(name, files)
	if on {
		if !u.HasInstall || len(installLinks(u)) == 0 {
			fmt.Fprintf(os.Stderr, "The unit files have no installation config (WantedBy=, RequiredBy=, UpheldBy=,\nAlso=, or Alias= settings in the [Install] section, and DefaultInstance= for\ntemplate units). This means they are not meant to be enabled or disabled using systemctl.\n")
			return 0
		}
		for _, l := range installLinks(u) {
			if target, err := os.Readlink(l); err == nil && target == u.Paths[0] {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
				return fail("Failed to enable unit: %v", err)
			}
			_ = os.Remove(l)
			if err := os.Symlink(u.Paths[0], l); err != nil {
				return fail("Failed to enable unit: %v", err)
			}
			fmt.Fprintf(os.Stderr, "Created symlink %s → %s.\n", l, u.Paths[0])
		}
	} else {
		for _, l := range enabledLinks(name) {
			if err := os.Remove(l); err == nil {
				fmt.Fprintf(os.Stderr, "Removed \"%s\".\n", l)
			}
		}
	}
	return daemonReload()
}

// isEnabled prints the unit file state: enabled, disabled or static.
func isEnabled(name string) int {
	files, err := unitFiles(name)
	if err != nil {
		return fail("Failed to get unit file state for %s: No such file or directory", name)
	}
	switch u := parseUnit(name, files); {
	case enabled(name):
		fmt.Println("enabled")
		return 0
	case !u.HasInstall:
		fmt.Println("static")
		return 0
	}
	fmt.Println("disabled")
	return 1
}

// watchPath is a started .path unit: it polls its conditions and starts
// the unit it triggers whenever they hold and that unit is not running,
// as systemd re-checks a path unit whenever its unit goes inactive.
func watchPath(u *unit) int {
	_ = os.WriteFile(pidFile(u.Name), fmt.Appendf(nil, "%d", os.Getpid()), 0o644)
	self, _ := os.Executable()
	type seen struct {
		exists bool
		mtime  time.Time
		size   int64
	}
	last := map[string]seen{}
	for _, c := range u.PathConds {
		fi, err := os.Stat(c[1])
		if err == nil {
			last[c[1]] = seen{true, fi.ModTime(), fi.Size()}
		}
	}
	first := true
	for {
		fire := false
		for _, c := range u.PathConds {
			fi, err := os.Stat(c[1])
			now := seen{}
			if err == nil {
				now = seen{true, fi.ModTime(), fi.Size()}
			}
			switch c[0] {
			case "PathExists":
				fire = fire || now.exists
			case "PathExistsGlob":
				m, _ := filepath.Glob(c[1])
				fire = fire || len(m) > 0
			case "DirectoryNotEmpty":
				entries, _ := os.ReadDir(c[1])
				fire = fire || len(entries) > 0
			case "PathChanged", "PathModified":
				fire = fire || (!first && now != last[c[1]] && now.exists)
			}
			last[c[1]] = now
		}
		first = false
		if _, stopping := os.Stat(filepath.Join(stateDir, u.Trigger+".stopping")); fire && stopping != nil && activeState(u.Trigger) != "active" {
			cmd := exec.Command(self, "start", u.Trigger)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			_ = cmd.Run()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// environmentProperty is the unit's Environment= as `show` prints it:
// assignments in order, quoted when they hold spaces.
func environmentProperty(u *unit) string {
	out := make([]string, len(u.Environment))
	for i, kv := range u.Environment {
		if strings.ContainsAny(kv, " \t\"'\\") {
			kv = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(kv) + `"`
		}
		out[i] = kv
	}
	return strings.Join(out, " ")
}
