package main

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// unit is a service unit with its drop-ins merged.
type unit struct {
	Name            string
	Paths           []string // unit file then drop-ins, in the order applied
	Type            string
	RemainAfterExit bool
	Environment     []string // K=V, in order
	EnvFiles        []string
	ExecStartPre    []string
	ExecStart       []string
	ExecStop        []string
	ExecStopPost    []string
	WantedBy        []string // [Install]
	RequiredBy      []string
	HasInstall      bool
	// [Path]: conditions ("PathExists", path) in order, and the unit they
	// start (Unit=, by default the .service of the same name).
	PathConds [][2]string
	Trigger   string
	// [Unit] ordering: the units this one starts after, and before.
	After, Before []string
}

// unitFile is one file of a unit, as read from disk or as loaded.
type unitFile struct {
	Path string
	Data string
}

var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

func normalize(name string) string {
	if !strings.Contains(name, ".") {
		return name + ".service"
	}
	return name
}

// unitFiles reads a unit's files the way systemd finds them: the unit file
// from the first unit directory that has it, then *.conf drop-ins from
// NAME.d in every directory (/etc's winning over a same-named one
// elsewhere), in lexical order of their names.
func unitFiles(name string) ([]unitFile, error) {
	var main string
	for _, d := range unitDirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			main = p
			break
		}
	}
	if main == "" {
		return nil, os.ErrNotExist
	}
	paths := []string{main}
	seen := map[string]string{}
	for i := len(unitDirs) - 1; i >= 0; i-- {
		matches, _ := filepath.Glob(filepath.Join(unitDirs[i], name+".d", "*.conf"))
		for _, m := range matches {
			seen[filepath.Base(m)] = m // earlier dirs (/etc) win
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		paths = append(paths, seen[n])
	}
	var files []unitFile
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, unitFile{Path: p, Data: string(data)})
	}
	return files, nil
}

// parseUnit merges a unit's files: the unit file first, then the
// drop-ins; list settings accumulate and an empty assignment resets them.
func parseUnit(name string, files []unitFile) *unit {
	u := &unit{Name: name, Type: "simple"}
	if strings.HasSuffix(name, ".path") {
		u.Trigger = strings.TrimSuffix(name, ".path") + ".service"
	}
	for _, f := range files {
		u.Paths = append(u.Paths, f.Path)
		u.apply(f.Data)
	}
	return u
}

func (u *unit) apply(text string) {
	section := ""
	sc := bufio.NewScanner(strings.NewReader(joinContinuations(text)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch section {
		case "Install":
			u.HasInstall = true
			switch k {
			case "WantedBy":
				u.WantedBy = appendWords(u.WantedBy, v)
			case "RequiredBy":
				u.RequiredBy = appendWords(u.RequiredBy, v)
			}
			continue
		case "Path":
			switch k {
			case "PathExists", "PathExistsGlob", "PathChanged", "PathModified", "DirectoryNotEmpty":
				if v == "" {
					u.PathConds = nil
				} else {
					u.PathConds = append(u.PathConds, [2]string{k, v})
				}
			case "Unit":
				u.Trigger = v
			}
			continue
		case "Unit":
			switch k {
			case "After":
				u.After = appendWords(u.After, v)
			case "Before":
				u.Before = appendWords(u.Before, v)
			}
			continue
		case "Service":
		default:
			continue
		}
		switch k {
		case "Type":
			u.Type = v
		case "RemainAfterExit":
			u.RemainAfterExit = v == "yes" || v == "true" || v == "1"
		case "Environment":
			if v == "" {
				u.Environment = nil
			}
			for _, kv := range splitWords(v) {
				u.Environment = setEnv(u.Environment, kv)
			}
		case "EnvironmentFile":
			if v == "" {
				u.EnvFiles = nil
			} else {
				u.EnvFiles = append(u.EnvFiles, v)
			}
		case "ExecStartPre":
			u.ExecStartPre = appendOrReset(u.ExecStartPre, v)
		case "ExecStart":
			u.ExecStart = appendOrReset(u.ExecStart, v)
		case "ExecStop":
			u.ExecStop = appendOrReset(u.ExecStop, v)
		case "ExecStopPost":
			u.ExecStopPost = appendOrReset(u.ExecStopPost, v)
		}
	}
}

// setEnv sets KEY=VALUE in env, replacing an earlier KEY where it was, as
// systemd merges Environment= assignments.
func setEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	for i, e := range env {
		if ek, _, _ := strings.Cut(e, "="); ek == k {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}

// appendWords adds a space-separated list to list; an empty value resets it.
func appendWords(list []string, v string) []string {
	if v == "" {
		return nil
	}
	return append(list, strings.Fields(v)...)
}

func appendOrReset(list []string, v string) []string {
	if v == "" {
		return nil
	}
	return append(list, v)
}

func joinContinuations(s string) string {
	return strings.ReplaceAll(s, "\\\n", " ")
}

// env is the unit's environment: the process's own, then EnvironmentFile=
// then Environment= (later wins).
func (u *unit) env() []string {
	vars := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
	order := []string{"PATH", "HOME"}
	set := func(kv string) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return
		}
		if _, dup := vars[k]; !dup {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, f := range u.EnvFiles {
		// A missing file is an error for systemd unless the name has a "-"
		// prefix; the stand-in skips it either way.
		data, err := os.ReadFile(strings.TrimPrefix(f, "-"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			set(k + "=" + strings.Trim(v, `"'`))
		}
	}
	for _, kv := range u.Environment {
		set(kv)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// splitWords splits a systemd value into words, honouring quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// command turns an Exec line into argv: the optional "-" prefix (ignore
// failure), then words with $VAR / ${VAR} expanded from env. ${VAR} keeps
// one word; a bare $VAR splits on whitespace.
func command(line string, env []string) (argv []string, ignoreFailure bool) {
	line = strings.TrimSpace(line)
	for len(line) > 0 && strings.ContainsRune("-@+!:", rune(line[0])) {
		if line[0] == '-' {
			ignoreFailure = true
		}
		line = line[1:]
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for _, w := range splitWords(line) {
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") && len(w) > 1 {
			argv = append(argv, strings.Fields(vars[w[1:]])...)
			continue
		}
		argv = append(argv, expandBraces(w, vars))
	}
	if len(argv) > 0 {
		argv[0] = standIn(argv[0])
	}
	return argv, ignoreFailure
}

// standInDir holds the test host's stand-in programs (docker, podman,
// systemctl, the kubelet simulator).
const standInDir = "/usr/local/sbin"

// standIn resolves a unit's absolute program path that does not exist on
// the test host, such as /usr/bin/docker, to the stand-in of that name:
// the test host's /usr/bin is the machine's, where no container runtime
// is installed.
func standIn(prog string) string {
	if !filepath.IsAbs(prog) {
		return prog
	}
	if _, err := os.Stat(prog); err == nil {
		return prog
	}
	alt := filepath.Join(standInDir, filepath.Base(prog))
	if _, err := os.Stat(alt); err == nil {
		return alt
	}
	return prog
}

func expandBraces(w string, vars map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(w, "${")
		if i < 0 {
			b.WriteString(w)
			return b.String()
		}
		j := strings.Index(w[i:], "}")
		if j < 0 {
			b.WriteString(w)
			return b.String()
		}
		b.WriteString(w[:i])
		b.WriteString(vars[w[i+2:i+j]])
		w = w[i+j+1:]
	}
}
