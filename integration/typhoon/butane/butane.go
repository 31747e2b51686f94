package butane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Kinds of error; an *Error unwraps to one of them.
var (
	// ErrUnknownField: a field Butane's spec does not have.
	ErrUnknownField = errors.New("unknown field")
	// ErrUnsupported: a field or value Butane has but this package does
	// not reproduce.
	ErrUnsupported = errors.New("not supported")
	// ErrInvalid: a value Butane or Ignition would refuse (wrong type,
	// relative path, duplicate path, unit name without a unit type, ...),
	// or YAML that does not parse.
	ErrInvalid = errors.New("invalid config")
)

// Error is an error at a field of a config file.
type Error struct {
	File   string
	Line   int
	Column int
	Field  string // storage.files[3].contents.inline
	Kind   error
	Msg    string
}

func (e *Error) Error() string {
	field := ""
	if e.Field != "" {
		field = e.Field + ": "
	}
	return fmt.Sprintf("%s:%d:%d: %s%v: %s", e.File, e.Line, e.Column, field, e.Kind, e.Msg)
}

// Unwrap returns the kind of error.
func (e *Error) Unwrap() error { return e.Kind }

// File is one entry Ignition leaves on disk.
type File struct {
	Path string
	// Mode holds the permission bits (0644); 0 for links.
	Mode uint32
	Data []byte
	// Owner and Group are names, "root" unless the config says otherwise.
	Owner string
	Group string
	// Link, when set, makes this a symbolic link to Link.
	Link string
	// Dir makes this a directory.
	Dir bool
	// Overwrite is the entry's overwrite: whether Ignition replaces what
	// already exists at Path (a directory: anything that is not a
	// directory) instead of failing.
	Overwrite bool
}

// User is a passwd user of the config.
type User struct {
	Name              string
	SSHAuthorizedKeys []string
}

// Config is what a Butane config puts on a host.
type Config struct {
	Variant string // flatcar or fcos
	Version string // 1.0.0
	// Files, sorted by path.
	Files []File
	// Enable lists units enabled with no contents in the config (shipped
	// by the OS), for the caller to enable; Disable those with
	// enabled: false.
	Enable  []string
	Disable []string
	Users   []User
}

// File returns the entry at path.
func (c *Config) File(path string) (File, bool) {
	for _, f := range c.Files {
		if f.Path == path {
			return f, true
		}
	}
	return File{}, false
}

// UnitDir is where Ignition writes systemd units.
const UnitDir = "/etc/systemd/system"

var versions = map[string][]string{
	"flatcar": {"1.0.0", "1.1.0"},
	"fcos":    {"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.6.0"},
}

// Parse reads the rendered Butane config data of the file name (the name
// is used in errors).
func Parse(name string, data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &Error{File: name, Line: 1, Column: 1, Kind: ErrInvalid, Msg: "empty config"}
		}
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalid, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		line := extra.Line
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalid, err)
		}
		return nil, &Error{File: name, Line: line, Column: 1, Kind: ErrInvalid, Msg: "a second YAML document: a config is one document"}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{File: name, Line: 1, Column: 1, Kind: ErrInvalid, Msg: "empty config"}
	}
	p := &parser{name: name, cfg: &Config{}}
	if err := p.root(doc.Content[0]); err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.cfg, nil
}

type parser struct {
	name  string
	cfg   *Config
	files []entry
	units []*unit
}

// entry is a File with where it was defined.
type entry struct {
	File
	field string
	node  *yaml.Node
}

type unit struct {
	name     string
	enabled  *bool
	mask     bool
	contents *string
	dropins  []dropin
	field    string
	node     *yaml.Node
}

type dropin struct {
	name     string
	contents *string
	field    string
	node     *yaml.Node
}

func (p *parser) errAt(n *yaml.Node, field string, kind error, format string, args ...any) *Error {
	return &Error{File: p.name, Line: n.Line, Column: n.Column, Field: field, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// fields describes a mapping: the handler of each supported key, and the
// keys the spec has that this package refuses.
type fields struct {
	known       map[string]func(n *yaml.Node, field string) error
	unsupported []string
	required    []string
}

// mapping walks a mapping node strictly.
func (p *parser) mapping(n *yaml.Node, field string, f fields) error {
	if n.Kind != yaml.MappingNode {
		return p.errAt(n, field, ErrInvalid, "a mapping is expected, not %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sub := k.Value
		if field != "" {
			sub = field + "." + k.Value
		}
		if seen[k.Value] {
			return p.errAt(k, sub, ErrInvalid, "defined twice")
		}
		seen[k.Value] = true
		if h, ok := f.known[k.Value]; ok {
			if err := h(v, sub); err != nil {
				return err
			}
			continue
		}
		for _, u := range f.unsupported {
			if u == k.Value {
				return p.errAt(k, sub, ErrUnsupported, "Butane has this field but the test world does not reproduce it")
			}
		}
		return p.errAt(k, sub, ErrUnknownField, "no such field in the Butane spec (the butane tool refuses it in strict mode)")
	}
	for _, r := range f.required {
		if !seen[r] {
			return p.errAt(n, field, ErrInvalid, "%s is required", r)
		}
	}
	return nil
}

// sequence walks a sequence node.
func (p *parser) sequence(n *yaml.Node, field string, each func(n *yaml.Node, field string) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errAt(n, field, ErrInvalid, "a list is expected, not %s", kindName(n))
	}
	for i, e := range n.Content {
		if err := each(e, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("the %s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
}

func (p *parser) str(dst *string) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return p.errAt(n, field, ErrInvalid, "a string is expected, not %s", kindName(n))
		}
		*dst = n.Value
		return nil
	}
}

func (p *parser) optStr(dst **string) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		var s string
		if err := p.str(&s)(n, field); err != nil {
			return err
		}
		*dst = &s
		return nil
	}
}

func (p *parser) boolean(dst **bool) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return p.errAt(n, field, ErrInvalid, "true or false is expected, not %s", kindName(n))
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return p.errAt(n, field, ErrInvalid, "%v", err)
		}
		*dst = &b
		return nil
	}
}

func (p *parser) flag(dst *bool) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		var b *bool
		if err := p.boolean(&b)(n, field); err != nil {
			return err
		}
		*dst = b != nil && *b
		return nil
	}
}

// mode reads a mode (0644 in YAML is octal, as with the butane tool).
func (p *parser) mode(dst *uint32) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		var m int64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&m) != nil {
			return p.errAt(n, field, ErrInvalid, "a mode such as 0644 is expected, not %s", kindName(n))
		}
		if m < 0 || m > 0o7777 {
			return p.errAt(n, field, ErrInvalid, "mode %#o is out of range", m)
		}
		*dst = uint32(m)
		return nil
	}
}

// owner reads a user or group: {name: ...}.
func (p *parser) owner(dst *string) func(*yaml.Node, string) error {
	return func(n *yaml.Node, field string) error {
		return p.mapping(n, field, fields{
			known:       map[string]func(*yaml.Node, string) error{"name": p.str(dst)},
			unsupported: []string{"id"},
		})
	}
}

func (p *parser) root(n *yaml.Node) error {
	var variant, version string
	err := p.mapping(n, "", fields{
		known: map[string]func(*yaml.Node, string) error{
			"variant": p.str(&variant),
			"version": p.str(&version),
			"storage": p.storage,
			"systemd": p.systemd,
			"passwd":  p.passwd,
		},
		unsupported: []string{"ignition", "kernel_arguments", "boot_device", "grub"},
		required:    []string{"variant", "version"},
	})
	if err != nil {
		return err
	}
	ok := false
	for _, v := range versions[variant] {
		ok = ok || v == version
	}
	if !ok {
		return p.errAt(n, "variant", ErrUnsupported, "variant %q version %q: only flatcar 1.0.0-1.1.0 and fcos 1.0.0-1.6.0 are read", variant, version)
	}
	p.cfg.Variant, p.cfg.Version = variant, version
	return nil
}

func (p *parser) storage(n *yaml.Node, field string) error {
	return p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"files":       func(n *yaml.Node, field string) error { return p.sequence(n, field, p.file) },
			"directories": func(n *yaml.Node, field string) error { return p.sequence(n, field, p.directory) },
			"links":       func(n *yaml.Node, field string) error { return p.sequence(n, field, p.link) },
		},
		unsupported: []string{"disks", "raid", "filesystems", "luks", "trees"},
	})
}

func (p *parser) file(n *yaml.Node, field string) error {
	e := entry{File: File{Mode: 0o644, Owner: "root", Group: "root", Data: []byte{}}, field: field, node: n}
	err := p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"path":      p.str(&e.Path),
			"overwrite": p.flag(&e.Overwrite),
			"mode":      p.mode(&e.Mode),
			"user":      p.owner(&e.Owner),
			"group":     p.owner(&e.Group),
			"contents": func(n *yaml.Node, field string) error {
				var inline *string
				err := p.mapping(n, field, fields{
					known:       map[string]func(*yaml.Node, string) error{"inline": p.optStr(&inline)},
					unsupported: []string{"source", "local", "compression", "http_headers", "verification"},
				})
				if inline != nil {
					e.Data = []byte(*inline)
				}
				return err
			},
		},
		unsupported: []string{"append"},
		required:    []string{"path"},
	})
	if err != nil {
		return err
	}
	p.files = append(p.files, e)
	return nil
}

func (p *parser) directory(n *yaml.Node, field string) error {
	e := entry{File: File{Mode: 0o755, Owner: "root", Group: "root", Dir: true}, field: field, node: n}
	err := p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"path":      p.str(&e.Path),
			"overwrite": p.flag(&e.Overwrite),
			"mode":      p.mode(&e.Mode),
			"user":      p.owner(&e.Owner),
			"group":     p.owner(&e.Group),
		},
		required: []string{"path"},
	})
	if err != nil {
		return err
	}
	p.files = append(p.files, e)
	return nil
}

func (p *parser) link(n *yaml.Node, field string) error {
	e := entry{File: File{Owner: "root", Group: "root"}, field: field, node: n}
	var hard *bool
	err := p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"path":      p.str(&e.Path),
			"target":    p.str(&e.Link),
			"overwrite": p.flag(&e.Overwrite),
			"user":      p.owner(&e.Owner),
			"group":     p.owner(&e.Group),
			"hard":      p.boolean(&hard),
		},
		required: []string{"path", "target"},
	})
	if err != nil {
		return err
	}
	if hard != nil && *hard {
		return p.errAt(n, field+".hard", ErrUnsupported, "hard links are not reproduced")
	}
	if e.Link == "" {
		return p.errAt(n, field+".target", ErrInvalid, "a link needs a target")
	}
	p.files = append(p.files, e)
	return nil
}

func (p *parser) systemd(n *yaml.Node, field string) error {
	return p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"units": func(n *yaml.Node, field string) error { return p.sequence(n, field, p.unit) },
		},
	})
}

func (p *parser) unit(n *yaml.Node, field string) error {
	u := &unit{field: field, node: n}
	err := p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"name":     p.str(&u.name),
			"enabled":  p.boolean(&u.enabled),
			"mask":     p.flag(&u.mask),
			"contents": p.optStr(&u.contents),
			"dropins": func(n *yaml.Node, field string) error {
				return p.sequence(n, field, func(n *yaml.Node, field string) error {
					d := dropin{field: field, node: n}
					err := p.mapping(n, field, fields{
						known: map[string]func(*yaml.Node, string) error{
							"name":     p.str(&d.name),
							"contents": p.optStr(&d.contents),
						},
						unsupported: []string{"contents_local"},
						required:    []string{"name"},
					})
					u.dropins = append(u.dropins, d)
					return err
				})
			},
		},
		unsupported: []string{"contents_local"},
		required:    []string{"name"},
	})
	if err != nil {
		return err
	}
	p.units = append(p.units, u)
	return nil
}

func (p *parser) passwd(n *yaml.Node, field string) error {
	return p.mapping(n, field, fields{
		known: map[string]func(*yaml.Node, string) error{
			"users": func(n *yaml.Node, field string) error {
				return p.sequence(n, field, func(n *yaml.Node, field string) error {
					var u User
					err := p.mapping(n, field, fields{
						known: map[string]func(*yaml.Node, string) error{
							"name": p.str(&u.Name),
							"ssh_authorized_keys": func(n *yaml.Node, field string) error {
								return p.sequence(n, field, func(n *yaml.Node, field string) error {
									var k string
									if err := p.str(&k)(n, field); err != nil {
										return err
									}
									u.SSHAuthorizedKeys = append(u.SSHAuthorizedKeys, k)
									return nil
								})
							},
						},
						unsupported: []string{"password_hash", "ssh_authorized_keys_local", "uid", "gecos", "home_dir",
							"no_create_home", "primary_group", "groups", "no_user_group", "no_log_init", "shell", "should_exist", "system"},
						required: []string{"name"},
					})
					p.cfg.Users = append(p.cfg.Users, u)
					return err
				})
			},
		},
		unsupported: []string{"groups"},
	})
}

// unitTypes are the unit name suffixes systemd knows.
var unitTypes = []string{".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer", ".slice", ".scope"}

// finish turns the units into files and links, checks the paths and sorts
// the files.
func (p *parser) finish() error {
	byName := map[string]*unit{}
	for _, u := range p.units {
		typed := false
		for _, t := range unitTypes {
			typed = typed || (strings.HasSuffix(u.name, t) && len(u.name) > len(t))
		}
		if !typed || strings.Contains(u.name, "/") {
			return p.errAt(u.node, u.field+".name", ErrInvalid, "%q is not a unit name (name.service, name.path, ...)", u.name)
		}
		if byName[u.name] != nil {
			return p.errAt(u.node, u.field+".name", ErrInvalid, "unit %s is also defined at line %d", u.name, byName[u.name].node.Line)
		}
		byName[u.name] = u
	}
	for _, u := range p.units {
		if u.mask && (u.contents != nil || (u.enabled != nil && *u.enabled)) {
			return p.errAt(u.node, u.field+".mask", ErrInvalid, "a masked unit has neither contents nor enabled: true")
		}
		file := path.Join(UnitDir, u.name)
		if u.contents != nil {
			p.files = append(p.files, entry{File: File{Path: file, Mode: 0o644, Data: []byte(*u.contents), Owner: "root", Group: "root"}, field: u.field + ".contents", node: u.node})
		}
		for _, d := range u.dropins {
			if !strings.HasSuffix(d.name, ".conf") || strings.Contains(d.name, "/") {
				return p.errAt(d.node, d.field+".name", ErrInvalid, "drop-in %q: a drop-in name is NAME.conf", d.name)
			}
			if d.contents == nil {
				continue // Ignition writes nothing for a drop-in without contents
			}
			p.files = append(p.files, entry{File: File{Path: path.Join(UnitDir, u.name+".d", d.name), Mode: 0o644, Data: []byte(*d.contents), Owner: "root", Group: "root"}, field: d.field, node: d.node})
		}
		if u.mask {
			p.files = append(p.files, entry{File: File{Path: file, Link: "/dev/null", Owner: "root", Group: "root"}, field: u.field + ".mask", node: u.node})
		}
		switch {
		case u.enabled == nil:
		case !*u.enabled:
			p.cfg.Disable = append(p.cfg.Disable, u.name)
		case u.contents == nil:
			p.cfg.Enable = append(p.cfg.Enable, u.name)
		default:
			if err := p.enable(u, byName, map[string]bool{}); err != nil {
				return err
			}
		}
	}
	seen := map[string]entry{}
	for _, e := range p.files {
		if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path {
			return p.errAt(e.node, e.field+".path", ErrInvalid, "path %q is not absolute and clean", e.Path)
		}
		if prev, ok := seen[e.Path]; ok {
			return p.errAt(e.node, e.field, ErrInvalid, "%s is also defined by %s (line %d)", e.Path, prev.field, prev.node.Line)
		}
		seen[e.Path] = e
		p.cfg.Files = append(p.cfg.Files, e.File)
	}
	sort.SliceStable(p.cfg.Files, func(i, j int) bool { return p.cfg.Files[i].Path < p.cfg.Files[j].Path })
	p.cfg.Enable = dedupe(p.cfg.Enable)
	return nil
}

// dedupe drops repeated names, keeping the first.
func dedupe(names []string) []string {
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// enable adds the links systemctl enable makes for u from its [Install]
// section.
func (p *parser) enable(u *unit, byName map[string]*unit, done map[string]bool) error {
	if done[u.name] {
		return nil
	}
	done[u.name] = true
	field := u.field + ".contents"
	if strings.Contains(u.name, "@") {
		return p.errAt(u.node, field, ErrUnsupported, "enabling template unit %s is not reproduced", u.name)
	}
	install, err := installSection(*u.contents)
	if err != nil {
		return p.errAt(u.node, field, ErrInvalid, "unit %s: %v", u.name, err)
	}
	target := path.Join(UnitDir, u.name)
	link := func(at string) {
		p.files = append(p.files, entry{File: File{Path: at, Link: target, Owner: "root", Group: "root"}, field: field + " [Install]", node: u.node})
	}
	for _, t := range install["WantedBy"] {
		link(path.Join(UnitDir, t+".wants", u.name))
	}
	for _, t := range install["RequiredBy"] {
		link(path.Join(UnitDir, t+".requires", u.name))
	}
	for _, a := range install["Alias"] {
		link(path.Join(UnitDir, a))
	}
	if len(install["UpheldBy"]) > 0 || len(install["DefaultInstance"]) > 0 {
		return p.errAt(u.node, field, ErrUnsupported, "unit %s: UpheldBy= and DefaultInstance= are not reproduced", u.name)
	}
	for _, also := range install["Also"] {
		if o := byName[also]; o != nil && o.contents != nil {
			if err := p.enable(o, byName, done); err != nil {
				return err
			}
		} else if !done[also] {
			done[also] = true
			p.cfg.Enable = append(p.cfg.Enable, also)
		}
	}
	return nil
}

// installSection reads the [Install] section of a unit file: each key's
// space-separated values, lines joined by a trailing backslash, an empty
// assignment resetting the list, as systemd does.
func installSection(contents string) (map[string][]string, error) {
	out := map[string][]string{}
	section := ""
	lines := strings.Split(contents, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", i+1, line)
			}
			section = line[1 : len(line)-1]
			continue
		}
		if section != "Install" {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", i+1, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "WantedBy", "RequiredBy", "UpheldBy", "Alias", "Also", "DefaultInstance":
		default:
			return nil, fmt.Errorf("line %d: unknown [Install] setting %s", i+1, key)
		}
		if value == "" {
			delete(out, key)
			continue
		}
		out[key] = append(out[key], strings.Fields(value)...)
	}
	return out, nil
}

// Assets joins terraform-render-bootstrap's assets_dist (asset path →
// contents) into the controllers' /home/core/assets file as Typhoon's
// ssh.tf does: each asset as "##### PATH\nCONTENTS", joined by "\n", in
// the order Terraform iterates a map (keys sorted). The layout script
// /opt/bootstrap/layout splits it again with awk on the ##### lines.
func Assets(assets map[string][]byte) []byte {
	keys := make([]string, 0, len(assets))
	for k := range assets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("##### " + k + "\n")
		b.Write(assets[k])
	}
	return b.Bytes()
}
