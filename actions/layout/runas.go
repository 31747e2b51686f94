package layout

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
	"sigs.k8s.io/yaml"
)

// KubeletComponent is the kubelet's key in Layout.RunAs.
const KubeletComponent = "kubelet"

// RunAs is who a component's process runs as, which decides the files it
// can read: for a static pod, its securityContext as a container runtime
// applies it (the container's runAsUser and runAsGroup over the pod's,
// the pod's supplementalGroups added); for etcd-member.service, its
// container's --user, else the unit's User= and Group=; root when nothing
// says otherwise (the image's own user is not read) and for the kubelet.
type RunAs struct {
	// User is a uid or a user name; "0" is root.
	User string `json:"user"`
	// Group is a gid or a group name; "" is the user's primary group on
	// the host (0 when the host does not know the user), as a runtime
	// takes it from the image's /etc/passwd.
	Group string `json:"group,omitempty"`
	// Groups are supplementary groups.
	Groups []string `json:"groups,omitempty"`
	// From says where that is set.
	From string `json:"from"`
}

// Root is root, said by from.
func Root(from string) RunAs { return RunAs{User: "0", Group: "0", From: from} }

// String is user:group (+groups), as a message shows it.
func (r RunAs) String() string {
	s := "uid " + r.User
	if r.Group != "" {
		s += " gid " + r.Group
	}
	if len(r.Groups) > 0 {
		s += " groups " + strings.Join(r.Groups, ",")
	}
	return s
}

// securityContext is the part of a pod's or container's securityContext
// that says who it runs as.
type securityContext struct {
	RunAsUser          *int64  `json:"runAsUser"`
	RunAsGroup         *int64  `json:"runAsGroup"`
	RunAsNonRoot       *bool   `json:"runAsNonRoot"`
	SupplementalGroups []int64 `json:"supplementalGroups"`
}

// podSecurity is the part of a Pod manifest that says who its containers
// run as.
type podSecurity struct {
	Spec struct {
		SecurityContext *securityContext `json:"securityContext"`
		Containers      []struct {
			Command         []string         `json:"command"`
			Args            []string         `json:"args"`
			SecurityContext *securityContext `json:"securityContext"`
		} `json:"containers"`
	} `json:"spec"`
}

// podRunAs is who a static pod's container runs as.
func podRunAs(manifest string, pod, ctr *securityContext) RunAs {
	var uid, gid *int64
	var groups []int64
	if pod != nil {
		uid, gid, groups = pod.RunAsUser, pod.RunAsGroup, pod.SupplementalGroups
	}
	if ctr != nil {
		if ctr.RunAsUser != nil {
			uid = ctr.RunAsUser
		}
		if ctr.RunAsGroup != nil {
			gid = ctr.RunAsGroup
		}
	}
	if uid == nil && gid == nil && len(groups) == 0 {
		return Root(manifest + ": no runAsUser (root)")
	}
	r := RunAs{User: "0", From: manifest + ": securityContext"}
	if uid != nil {
		r.User = strconv.FormatInt(*uid, 10)
	}
	if gid != nil {
		r.Group = strconv.FormatInt(*gid, 10)
	}
	for _, g := range groups {
		r.Groups = append(r.Groups, strconv.FormatInt(g, 10))
	}
	return r
}

// userSpec reads docker's and podman's --user (user[:group]).
func userSpec(spec, from string) RunAs {
	u, g, _ := strings.Cut(spec, ":")
	if u == "" {
		u = "0"
	}
	return RunAs{User: u, Group: g, From: from}
}

// readRunAs finds who each component runs as: the static pods' manifests
// (readStaticPods found them) and etcd-member.service's files.
func readRunAs(l *Layout, es UnitState, r Reader) error {
	l.RunAs = map[string]RunAs{KubeletComponent: Root("the kubelet runs as root")}
	for comp, p := range l.StaticPods {
		b, err := r.ReadFile(p)
		if err != nil {
			return err
		}
		var pod podSecurity
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, c := range pod.Spec.Containers {
			cmd := append(append([]string(nil), c.Command...), c.Args...)
			if len(cmd) > 0 && path.Base(cmd[0]) == comp {
				l.RunAs[comp] = podRunAs(p, pod.Spec.SecurityContext, c.SecurityContext)
			}
		}
	}
	if l.Etcd.Mode != EtcdHostUnit {
		return nil
	}
	files := append([]string{es.FragmentPath}, es.DropInPaths...)
	var contents [][]byte
	var user, group string
	for _, p := range files {
		b, err := r.ReadFile(p)
		if err != nil {
			return fmt.Errorf("%s: %w", EtcdMember, err)
		}
		contents = append(contents, b)
		opts, err := unit.DeserializeOptions(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, o := range opts {
			switch o.Section + "." + o.Name {
			case "Service.User":
				user = strings.TrimSpace(o.Value)
			case "Service.Group":
				group = strings.TrimSpace(o.Value)
			}
		}
	}
	u, err := ParseUnit(files, contents)
	if err != nil {
		return fmt.Errorf("%s: %w", EtcdMember, err)
	}
	for _, line := range append(append([]string(nil), u.ExecStartPre...), u.ExecStart...) {
		words, err := Command(line)
		if err != nil || len(words) < 2 || words[1] != "run" {
			continue
		}
		rt := path.Base(words[0])
		if rt != "docker" && rt != "podman" {
			continue
		}
		if spec := runUser(words[2:]); spec != "" {
			l.RunAs["etcd"] = userSpec(spec, fmt.Sprintf("%s: %s run --user %s", EtcdMember, rt, spec))
			return nil
		}
		break
	}
	switch {
	case user != "":
		r := userSpec(user, fmt.Sprintf("%s: User=%s", EtcdMember, user))
		if group != "" {
			r.Group, r.From = group, r.From+" Group="+group
		}
		l.RunAs["etcd"] = r
	default:
		l.RunAs["etcd"] = Root(EtcdMember + ": no --user nor User= (root)")
	}
	return nil
}

// runUser is the --user (-u) of a docker or podman run's flags, the last
// one before the image.
func runUser(words []string) string {
	user := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if runValueFlags[name] && !hasVal && i+1 < len(words) {
			i++
			val = words[i]
		}
		if name == "user" || name == "u" {
			user = val
		}
	}
	return user
}

// Documented is the mode and owner (user:group) a layout gives a file it
// names, for a file Kedge must create where none was (a file it replaces
// keeps its own). Typhoon's layout step leaves etcd's files under
// /etc/ssl/etcd etcd's with mode 0500 and every other file 0644 and
// root's, keys included; Kedge writes keys and kubeconfigs (secret) 0600
// and certificates 0644, all root's.
func Documented(kind, p string, secret bool) (mode, owner string) {
	switch {
	case (kind == KindTyphoonFlatcar || kind == KindTyphoonFCOS) && strings.HasPrefix(p, TyphoonEtcdDir+"/"):
		return "0500", "etcd:etcd"
	case kind == KindTyphoonFlatcar || kind == KindTyphoonFCOS:
		return "0644", "root:root"
	case secret:
		return "0600", "root:root"
	}
	return "0644", "root:root"
}

// TyphoonEtcdDir holds etcd's own certificates and keys on Typhoon's
// controllers.
const TyphoonEtcdDir = "/etc/ssl/etcd"
