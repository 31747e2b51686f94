package layout

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// UnitDir is where an operator's (and Typhoon's) units live; Kedge copies
// a kubelet's unit files only from there.
const UnitDir = "/etc/systemd/system"

// Identity is what names a node on its host: the Node's name, the host's
// own name and its address.
type Identity struct {
	NodeName string `json:"nodeName"`
	Hostname string `json:"hostname"`
	Address  string `json:"address"`
}

// CopyFile is one file of a kubelet copied to another node.
type CopyFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    string `json:"mode"`
}

// KubeletFiles are the files that make a worker's kubelet what it is, as
// Discover found them: kubelet.service and its drop-ins, kubelet.path,
// the KubeletConfiguration and its --config-dir drop-ins. Credentials are
// not among them: a joining node gets its own.
func KubeletFiles(l Layout) ([]string, error) {
	k := l.Kubelet
	if k == nil {
		return nil, fmt.Errorf("no kubelet")
	}
	var files []string
	for _, f := range k.Unit.Files {
		if !strings.HasPrefix(f, UnitDir+"/") {
			return nil, fmt.Errorf("%s is not under %s: Kedge copies only the units an operator wrote", f, UnitDir)
		}
		files = append(files, f)
	}
	if k.PathUnit != "" {
		if !strings.HasPrefix(k.PathUnit, UnitDir+"/") {
			return nil, fmt.Errorf("%s is not under %s: Kedge copies only the units an operator wrote", k.PathUnit, UnitDir)
		}
		files = append(files, k.PathUnit)
	}
	if k.Config == "" {
		return nil, fmt.Errorf("the kubelet has no --config")
	}
	files = append(files, k.Config)
	files = append(files, k.ConfigDropIns...)
	return files, nil
}

// Retarget makes a worker's kubelet files (KubeletFiles, read from node
// from) right for node to: its --hostname-override and --node-ip become
// to's. Anything else in them that names from (its Node name, host name
// or address) is refused, naming the file and line: Kedge will not guess
// what a node-specific setting should be on another node.
func Retarget(files []CopyFile, from, to Identity) ([]CopyFile, error) {
	if from.NodeName == "" || to.NodeName == "" {
		return nil, fmt.Errorf("retarget: a node name is missing")
	}
	override := false
	out := make([]CopyFile, 0, len(files))
	for _, f := range files {
		c := f.Content
		if strings.HasPrefix(f.Path, UnitDir+"/") {
			var n int
			c, n = replaceFlag(c, "hostname-override", from.NodeName, to.NodeName)
			override = override || n > 0
			if from.Address != "" && to.Address != "" {
				c, _ = replaceFlag(c, "node-ip", from.Address, to.Address)
			}
		}
		if err := mentions(f.Path, c, from); err != nil {
			return nil, err
		}
		out = append(out, CopyFile{Path: f.Path, Content: c, Mode: f.Mode})
	}
	if !override && !strings.EqualFold(to.Hostname, to.NodeName) {
		return nil, fmt.Errorf("the kubelet would register as %q (its host's name) but the inventory names the node %q, and the reference's kubelet.service has no --hostname-override to set: set nodeName to the host's name or rename the host", to.Hostname, to.NodeName)
	}
	return out, nil
}

// replaceFlag sets --name=old (or --name old, either quoted) to new,
// returning how many it replaced.
func replaceFlag(text, name, old, new string) (string, int) {
	re := regexp.MustCompile(`(--` + regexp.QuoteMeta(name) + `(?:=|[ \t]+))("?)` + regexp.QuoteMeta(old) + `("?)([ \t\\'"]|$)`)
	n := 0
	text = re.ReplaceAllStringFunc(text, func(m string) string {
		n++
		sub := re.FindStringSubmatch(m)
		return sub[1] + sub[2] + new + sub[3] + sub[4]
	})
	return text, n
}

// mentions refuses a file that still names the node it came from.
func mentions(file, text string, from Identity) error {
	words := []struct{ what, word string }{{"Node name", from.NodeName}, {"host name", from.Hostname}, {"address", from.Address}}
	for i, line := range strings.Split(text, "\n") {
		for _, w := range words {
			if w.word == "" || !containsWord(line, w.word) {
				continue
			}
			return fmt.Errorf("%s:%d names the reference node's %s %q outside --hostname-override and --node-ip: Kedge will not guess what it should be on the new node (join it like a node without such a setting: like=NODE)", file, i+1, w.what, w.word)
		}
	}
	return nil
}

// containsWord reports whether word appears in line on its own: not part
// of a longer name or address.
func containsWord(line, word string) bool {
	lower, word := strings.ToLower(line), strings.ToLower(word)
	for i := 0; ; {
		j := strings.Index(lower[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !nameByte(lower[start-1])) && (end == len(lower) || !nameByte(lower[end]) || lower[end] == '.' && (end+1 == len(lower) || !nameByte(lower[end+1]))) {
			return true
		}
		i = start + 1
	}
}

func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.' || b == '_'
}

// WorkerRoleLabel is the label Typhoon's workers register with
// (--node-labels=node.kubernetes.io/node): their role, the same on every
// worker, so a new worker keeps it.
const WorkerRoleLabel = "node.kubernetes.io/node"

// The kubelet flags that give a Node its initial labels and taints.
const (
	nodeLabelsFlag = "node-labels"
	taintsFlag     = "register-with-taints"
)

// flagLineRE is one of those flags on a line of its own inside a command
// continued over several lines, as Typhoon writes them: indent, flag,
// value, and the line's continuation (a trailing backslash) if any.
var flagLineRE = regexp.MustCompile(`^([ \t]*)--(node-labels|register-with-taints)(?:=|[ \t]+)(\S+?)([ \t]*\\)?[ \t]*$`)

// labelTaintRE is what a label or taint may hold on a unit's command line.
var labelTaintRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/=:-]*$`)

// Relabel makes a worker's kubelet files (KubeletFiles) register the new
// node with its own labels and taints, never the reference's, and with
// Typhoon's worker role label when the reference is a controller
// (fromController): in the
// kubelet's units every --node-labels and --register-with-taints is
// taken out but Typhoon's worker role label (WorkerRoleLabel), and the
// new node's labels, then taints, each a flag on its own line, are put
// where the reference's were (before the role label, as Typhoon's
// templates order them). Flags Kedge cannot take out whole (not on a line
// of their own) and a KubeletConfiguration that registers with taints
// are refused, naming the file and line.
func Relabel(files []CopyFile, labels, taints []string, fromController bool) ([]CopyFile, error) {
	var add []string
	for _, l := range labels {
		if !labelTaintRE.MatchString(l) || !strings.Contains(l, "=") {
			return nil, fmt.Errorf("label %q is not key=value", l)
		}
		if k, _, _ := strings.Cut(l, "="); k == WorkerRoleLabel {
			continue // the role label stays as the reference has it
		}
		add = append(add, "--"+nodeLabelsFlag+"="+l)
	}
	for _, t := range taints {
		if !labelTaintRE.MatchString(t) || !strings.Contains(t, ":") {
			return nil, fmt.Errorf("taint %q is not key[=value]:Effect", t)
		}
		add = append(add, "--"+taintsFlag+"="+t)
	}
	// A worker made from a controller (a cluster with no other worker)
	// registers with Typhoon's worker role label all the same, after its
	// own labels and taints, as Typhoon's worker template writes it.
	if fromController && !slices.ContainsFunc(files, func(f CopyFile) bool {
		return strings.HasPrefix(f.Path, UnitDir+"/") && strings.Contains(f.Content, "--"+nodeLabelsFlag+"="+WorkerRoleLabel)
	}) {
		add = append(add, "--"+nodeLabelsFlag+"="+WorkerRoleLabel)
	}
	out := make([]CopyFile, len(files))
	copy(out, files)
	// The new flags go into the command that runs the kubelet: the last
	// one naming ${KUBELET_IMAGE} (a later drop-in's replaces an earlier
	// command).
	target := -1
	for i, f := range out {
		if !strings.HasPrefix(f.Path, UnitDir+"/") {
			if err := checkNoTaints(f); err != nil {
				return nil, err
			}
			continue
		}
		if strings.Contains(f.Content, "${"+ImageVariable+"}") || strings.Contains(f.Content, "$"+ImageVariable) {
			target = i
		}
	}
	for i, f := range out {
		if !strings.HasPrefix(f.Path, UnitDir+"/") {
			continue
		}
		var ins []string
		if i == target {
			ins = add
		}
		c, err := relabelUnit(f.Path, f.Content, ins)
		if err != nil {
			return nil, err
		}
		out[i].Content = c
	}
	if target < 0 && len(add) > 0 {
		return nil, fmt.Errorf("no unit runs the kubelet from ${%s}: Kedge cannot give the new node its labels and taints", ImageVariable)
	}
	return out, nil
}

// checkNoTaints refuses a KubeletConfiguration (or --config-dir drop-in)
// that registers the node with taints: they are the reference's.
func checkNoTaints(f CopyFile) error {
	var c struct {
		RegisterWithTaints []any `json:"registerWithTaints"`
	}
	if err := yaml.Unmarshal([]byte(f.Content), &c); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if len(c.RegisterWithTaints) == 0 {
		return nil
	}
	line := 0
	for i, l := range strings.Split(f.Content, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "registerWithTaints:") {
			line = i + 1
			break
		}
	}
	return fmt.Errorf("%s:%d registers the node with the reference's taints (registerWithTaints): a new node's taints come from the inventory; take them out of the reference's KubeletConfiguration or join like another worker (like=NODE)", f.Path, line)
}

// continues reports whether a unit file line continues on the next.
func continues(line string) bool {
	return strings.HasSuffix(strings.TrimRight(line, " \t"), "\\")
}

// relabelUnit takes the labels and taints out of one unit file's commands
// (Relabel) and puts ins into the command that runs ${KUBELET_IMAGE}.
func relabelUnit(file, text string, ins []string) (string, error) {
	lines := strings.Split(text, "\n")
	var out []string
	inserted := len(ins) == 0
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines)-1 && continues(lines[j]) {
			j++
		}
		cmd := lines[i : j+1]
		run := strings.Contains(strings.Join(cmd, "\n"), "${"+ImageVariable+"}") || strings.Contains(strings.Join(cmd, "\n"), "$"+ImageVariable)
		var add []string
		if run && !inserted {
			add, inserted = ins, true
		}
		block, err := relabelCommand(file, i, cmd, add)
		if err != nil {
			return "", err
		}
		out = append(out, block...)
		i = j + 1
	}
	if !inserted {
		return "", fmt.Errorf("%s: no command runs the kubelet from ${%s}", file, ImageVariable)
	}
	return strings.Join(out, "\n"), nil
}

// relabelCommand rewrites one command (a line and the lines it continues
// onto; first is the first one's index in file): labels and taints out
// but the worker role label, add in where they were.
func relabelCommand(file string, first int, cmd, add []string) ([]string, error) {
	type item struct {
		text string // the line without its continuation
		cont string // the continuation as written (" \\"), if any
	}
	var items []item
	role, dropped := -1, -1
	indent := ""
	for k, line := range cmd {
		it := item{text: line}
		if continues(line) {
			t := strings.TrimRight(line, " \t")
			it.text = strings.TrimRight(t[:len(t)-1], " \t")
			it.cont = line[len(it.text):]
		}
		m := flagLineRE.FindStringSubmatch(line)
		if k == 0 || m == nil {
			if strings.Contains(line, "--"+nodeLabelsFlag) || strings.Contains(line, "--"+taintsFlag) {
				return nil, fmt.Errorf("%s:%d sets --%s or --%s not on a line of its own: Kedge takes the reference's labels and taints out of the kubelet's command only when each flag has its own line, as Typhoon writes them", file, first+k+1, nodeLabelsFlag, taintsFlag)
			}
			items = append(items, it)
			continue
		}
		ws, name, value := m[1], m[2], m[3]
		indent = ws
		words, err := SplitWords(value)
		if err != nil || len(words) != 1 {
			return nil, fmt.Errorf("%s:%d: --%s %s is not one value", file, first+k+1, name, value)
		}
		var keep []string
		if name == nodeLabelsFlag {
			for _, l := range strings.Split(words[0], ",") {
				if k, _, _ := strings.Cut(l, "="); k == WorkerRoleLabel {
					keep = append(keep, l)
				}
			}
		}
		if len(keep) == 0 {
			if dropped < 0 {
				dropped = len(items)
			}
			continue
		}
		if strings.Join(keep, ",") != words[0] {
			it.text = ws + "--" + nodeLabelsFlag + "=" + strings.Join(keep, ",")
		}
		role = len(items)
		items = append(items, it)
	}
	if len(add) > 0 {
		at := len(items)
		switch {
		case role >= 0:
			at = role
		case dropped >= 0:
			at = dropped
		default:
			if indent = leadingSpace(items[len(items)-1].text); len(items) == 1 || indent == "" {
				indent = "  "
			}
		}
		news := make([]item, 0, len(add)+len(items)-at)
		for _, a := range add {
			news = append(news, item{text: indent + a})
		}
		items = append(items[:at], append(news, items[at:]...)...)
	}
	out := make([]string, len(items))
	for k, it := range items {
		switch {
		case k == len(items)-1:
			out[k] = it.text
		case it.cont != "":
			out[k] = it.text + it.cont
		default:
			out[k] = it.text + " \\"
		}
	}
	return out, nil
}

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}
