package layout

import (
	"fmt"
	"regexp"
	"strings"
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
