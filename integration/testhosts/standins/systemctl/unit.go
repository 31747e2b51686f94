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
}

var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

func normalize(name string) string {
	if !strings.Contains(name, ".") {
		return name + ".service"
	}
	return name
}

// loadUnit reads a unit and its drop-ins the way systemd merges them:
// the unit file first, then *.conf drop-ins in lexical order; list settings
// accumulate and an empty assignment resets them.
func loadUnit(name string) (*unit, error) {
	u := &unit{Name: name, Type: "simple"}
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
	files := []string{main}
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
		files = append(files, seen[n])
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u.Paths = append(u.Paths, f)
		u.apply(string(data))
	}
	return u, nil
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
		if section != "Service" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "Type":
			u.Type = v
		case "RemainAfterExit":
			u.RemainAfterExit = v == "yes" || v == "true" || v == "1"
		case "Environment":
			if v == "" {
				u.Environment = nil
			}
			u.Environment = append(u.Environment, splitWords(v)...)
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
		}
	}
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
