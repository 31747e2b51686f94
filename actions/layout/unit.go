package layout

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// Unit is a service unit as systemd applies it: the fragment, then each
// drop-in in order.
type Unit struct {
	// Files are the fragment and its drop-ins, in the order systemd reads
	// them.
	Files []string `json:"files"`
	// Environment is the Environment= settings in effect (a later one
	// wins); EnvironmentFrom names the file each variable was last set in.
	Environment     map[string]string `json:"environment,omitempty"`
	EnvironmentFrom map[string]string `json:"environmentFrom,omitempty"`
	// ExecStartPre and ExecStart are the command lines in effect (an
	// empty assignment resets the list), continuations joined.
	ExecStartPre []string `json:"execStartPre,omitempty"`
	ExecStart    []string `json:"execStart,omitempty"`
	// Path holds a path unit's conditions (PathExists=...).
	Path map[string]string `json:"path,omitempty"`
	// sole names, for each file whose one setting is a single
	// environment variable (KUBELET_IMAGE, ETCD_IMAGE), that variable: a
	// swap or an upgrade may rewrite such a file whole.
	sole map[string]string
	// execStartPreFrom and execStartFrom name the file each command line
	// of ExecStartPre and ExecStart was read from.
	execStartPreFrom, execStartFrom []string
}

// ParseUnit merges a unit's files (fragment first, then drop-ins) the way
// systemd does for the settings Kedge reads.
func ParseUnit(files []string, contents [][]byte) (Unit, error) {
	u := Unit{Files: files, Environment: map[string]string{}, EnvironmentFrom: map[string]string{}, sole: map[string]string{}}
	for i, data := range contents {
		opts, err := unit.DeserializeOptions(bytes.NewReader(data))
		if err != nil {
			return u, fmt.Errorf("%s: %w", files[i], err)
		}
		u.sole[files[i]] = soleVariable(opts)
		for _, o := range opts {
			v := strings.TrimSpace(strings.ReplaceAll(o.Value, "\\\n", " "))
			switch o.Section + "." + o.Name {
			case "Service.Environment":
				words, err := SplitWords(v)
				if err != nil {
					return u, fmt.Errorf("%s: Environment=%s: %w", files[i], o.Value, err)
				}
				if len(words) == 0 {
					u.Environment, u.EnvironmentFrom = map[string]string{}, map[string]string{}
				}
				for _, w := range words {
					if k, val, ok := strings.Cut(w, "="); ok {
						u.Environment[k] = val
						u.EnvironmentFrom[k] = files[i]
					}
				}
			case "Service.ExecStartPre":
				u.ExecStartPre = resetOrAppend(u.ExecStartPre, v)
				u.execStartPreFrom = resetOrAppend(u.execStartPreFrom, from(v, files[i]))
			case "Service.ExecStart":
				u.ExecStart = resetOrAppend(u.ExecStart, v)
				u.execStartFrom = resetOrAppend(u.execStartFrom, from(v, files[i]))
			case "Path.PathExists", "Path.PathExistsGlob", "Path.PathChanged", "Path.PathModified", "Path.DirectoryNotEmpty":
				if u.Path == nil {
					u.Path = map[string]string{}
				}
				u.Path[o.Name] = v
			}
		}
	}
	return u, nil
}

// soleVariable is the one variable a unit file sets when Environment=
// lines naming only it are all the file holds, else "".
func soleVariable(opts []*unit.UnitOption) string {
	sole := ""
	for _, o := range opts {
		if o.Section != "Service" || o.Name != "Environment" {
			return ""
		}
		words, err := SplitWords(strings.TrimSpace(o.Value))
		if err != nil || len(words) == 0 {
			return ""
		}
		for _, w := range words {
			k, _, _ := strings.Cut(w, "=")
			if sole != "" && k != sole {
				return ""
			}
			sole = k
		}
	}
	return sole
}

// from is file, or "" when v is an empty assignment (which resets the
// list), for resetOrAppend.
func from(v, file string) string {
	if v == "" {
		return ""
	}
	return file
}

func resetOrAppend(list []string, v string) []string {
	if v == "" {
		return nil
	}
	return append(list, v)
}

// Command is one command line of a unit: its words split as systemd does,
// with the leading special characters (-, @, +, !, :) removed.
func Command(line string) ([]string, error) {
	words, err := SplitWords(line)
	if err != nil || len(words) == 0 {
		return words, err
	}
	words[0] = strings.TrimLeft(words[0], "-@+!:")
	return words, nil
}

// SplitWords splits a command line as systemd does: at unquoted
// whitespace, with "…" and '…' quoting and backslash escapes.
func SplitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			inWord = true
		case quote == 0 && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// Expand replaces ${VAR} inside a word by its value, and a word that is
// $VAR by its value split at whitespace, as systemd does in command lines.
func Expand(word string, env map[string]string) ([]string, error) {
	if name, ok := strings.CutPrefix(word, "$"); ok && !strings.HasPrefix(name, "{") {
		return strings.Fields(env[name]), nil
	}
	var b strings.Builder
	for {
		start := strings.Index(word, "${")
		if start < 0 {
			b.WriteString(word)
			return []string{b.String()}, nil
		}
		end := strings.Index(word[start:], "}")
		if end < 0 {
			return nil, fmt.Errorf("%q: unterminated ${", word)
		}
		b.WriteString(word[:start])
		b.WriteString(env[word[start+2:start+end]])
		word = word[start+end+1:]
	}
}
