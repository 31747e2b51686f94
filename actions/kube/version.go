package kube

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a Kubernetes release: v<major>.<minor>.<patch>, and what a
// build appends to it (a distribution's "+k3s1", "-gke.100"), kept but
// not compared.
type Version struct {
	Major, Minor, Patch int
	Suffix              string
}

// ParseVersion reads "v1.36.3" (the leading v optional): what a Node
// reports as its kubelet's version, what /version answers, an image tag.
func ParseVersion(s string) (Version, error) {
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		rest = s
	}
	var v Version
	end := strings.IndexAny(rest, "-+")
	if end >= 0 {
		v.Suffix, rest = rest[end:], rest[:end]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version (want vMAJOR.MINOR.PATCH, e.g. v1.36.3)", s)
	}
	var n [3]int
	for i, p := range parts {
		var err error
		n[i], err = strconv.Atoi(p)
		if err != nil || n[i] < 0 || p[0] == '+' || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("%q is not a Kubernetes version (want vMAJOR.MINOR.PATCH, e.g. v1.36.3)", s)
		}
	}
	v.Major, v.Minor, v.Patch = n[0], n[1], n[2]
	return v, nil
}

// String is the version as Kubernetes writes it: v1.36.3.
func (v Version) String() string {
	return fmt.Sprintf("v%d.%d.%d%s", v.Major, v.Minor, v.Patch, v.Suffix)
}

// MinorString is the version's minor: v1.36.
func (v Version) MinorString() string { return fmt.Sprintf("v%d.%d", v.Major, v.Minor) }

// Compare orders releases by major, minor and patch (the suffix is not
// compared): -1, 0 or 1.
func (v Version) Compare(o Version) int {
	for _, d := range [...]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// minorsAfter is how many minors v is after o (negative when before);
// majors differ only across 1.x, where a major counts as a hundred.
func (v Version) minorsAfter(o Version) int {
	return (v.Major-o.Major)*100 + v.Minor - o.Minor
}
