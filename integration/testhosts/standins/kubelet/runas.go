package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// runAs is the identity a container's process runs as, from the pod's and
// the container's securityContext as a container runtime applies them: the
// container's runAsUser/runAsGroup over the pod's; a uid with no group
// takes its primary group from /etc/passwd (0 when it has none there); the
// pod's supplementalGroups are added. A nil *runAs is the image's default
// user, root here.
type runAs struct {
	uid    uint32
	gid    uint32
	gidSet bool
	groups []uint32
}

// errRunAsRoot is the kubelet's refusal of a container that must not run
// as root but would.
var errRunAsRoot = errors.New("container has runAsNonRoot and image will run as root")

// containerRunAs is the identity of container c of pod, or errRunAsRoot.
func containerRunAs(c corev1.Container, pod *corev1.Pod) (*runAs, error) {
	var uid, gid *int64
	var nonRoot *bool
	var groups []int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		uid, gid, nonRoot, groups = psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot, psc.SupplementalGroups
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
	}
	if nonRoot != nil && *nonRoot && (uid == nil || *uid == 0) {
		return nil, errRunAsRoot
	}
	if uid == nil && gid == nil && len(groups) == 0 {
		return nil, nil
	}
	r := &runAs{}
	if uid != nil {
		r.uid = uint32(*uid)
	}
	if gid != nil {
		r.gid, r.gidSet = uint32(*gid), true
	}
	for _, g := range groups {
		r.groups = append(r.groups, uint32(g))
	}
	return r, nil
}

// String is the identity as the mount-namespace helper takes it:
// UID:GID:G1,G2 with GID empty when it comes from /etc/passwd.
func (r *runAs) String() string {
	if r == nil {
		return ""
	}
	gid := ""
	if r.gidSet {
		gid = strconv.FormatUint(uint64(r.gid), 10)
	}
	var gs []string
	for _, g := range r.groups {
		gs = append(gs, strconv.FormatUint(uint64(g), 10))
	}
	return fmt.Sprintf("%d:%s:%s", r.uid, gid, strings.Join(gs, ","))
}

// parseRunAs reads String's form; "" is nil.
func parseRunAs(s string) (*runAs, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("run as %q: want UID:GID:GROUPS", s)
	}
	num := func(v string) (uint32, error) {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("run as %q: %w", s, err)
		}
		return uint32(n), nil
	}
	r := &runAs{}
	var err error
	if r.uid, err = num(parts[0]); err != nil {
		return nil, err
	}
	if parts[1] != "" {
		if r.gid, err = num(parts[1]); err != nil {
			return nil, err
		}
		r.gidSet = true
	}
	if parts[2] != "" {
		for _, g := range strings.Split(parts[2], ",") {
			n, err := num(g)
			if err != nil {
				return nil, err
			}
			r.groups = append(r.groups, n)
		}
	}
	return r, nil
}

// resolve fills in a group the securityContext did not give from the
// passwd file as the process will see it.
func (r *runAs) resolve(passwd string) {
	if r == nil || r.gidSet {
		return
	}
	r.gid, r.gidSet = primaryGroup(passwd, r.uid), true
}

// primaryGroup is uid's group in the passwd file, 0 when it is not listed.
func primaryGroup(passwd string, uid uint32) uint32 {
	f, err := os.Open(passwd)
	if err != nil {
		return 0
	}
	defer f.Close()
	want := strconv.FormatUint(uint64(uid), 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 4 && fields[2] == want {
			if g, err := strconv.ParseUint(fields[3], 10, 32); err == nil {
				return uint32(g)
			}
		}
	}
	return 0
}
