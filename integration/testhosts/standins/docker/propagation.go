package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A volume with shared or rshared propagation ("--volume
// /var/lib/kubelet:/var/lib/kubelet:rshared") makes mounts the container
// makes under it appear on the host, and the host's in the container: the
// kubelet's pod volumes (secrets, service account tokens) reach the
// runtime that starts the pods. As docker does, the stand-in refuses such
// a volume when its source is not on a shared mount, and gives the
// container a bind in the source's peer group; every other mount the
// container sees is private, so nothing else it mounts or unmounts leaves
// it.

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point  string // where it is mounted, unescaped
	shared bool   // in a peer group ("shared:N")
}

func readMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		e := mountEntry{point: unescapeMount(fields[4])}
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				e.shared = true
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf is the mount path is on: the last (topmost) entry whose mount
// point is path or its nearest parent.
func mountOf(mounts []mountEntry, path string) (mountEntry, bool) {
	var best mountEntry
	found := false
	for _, m := range mounts {
		if m.point == path || m.point == "/" || strings.HasPrefix(path, m.point+"/") {
			if !found || len(m.point) >= len(best.point) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// checkShared refuses a shared or rshared volume whose source is not on a
// shared mount, with docker's words.
func checkShared(v volume) error {
	if !v.Shared {
		return nil
	}
	src, err := filepath.EvalSymlinks(v.Src)
	if err != nil {
		return err
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	m, ok := mountOf(mounts, src)
	if !ok || !m.shared {
		return fmt.Errorf("path %s is mounted on %s but it is not a shared mount", v.Src, m.point)
	}
	return nil
}

// privateExceptShared makes every mount of the container's new mount
// namespace private, except the ones the shared volumes' sources are on,
// which stay in their peer groups. It checks the result: a mount left
// shared by mistake would carry the container's mounts and unmounts to
// the host.
func privateExceptShared(vols []volume) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, v := range vols {
		if !v.Shared {
			continue
		}
		src, err := filepath.EvalSymlinks(v.Src)
		if err != nil {
			return err
		}
		if m, ok := mountOf(mounts, src); ok && m.shared {
			keep[m.point] = true
		}
	}
	for _, m := range mounts {
		if m.shared && !keep[m.point] {
			if err := mount("", m.point, "", syscall.MS_PRIVATE, ""); err != nil {
				return err
			}
		}
	}
	after, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range after {
		if m.shared && !keep[m.point] {
			return fmt.Errorf("mount %s is still shared (a mount hidden under another): refusing to build the container's root", m.point)
		}
	}
	return nil
}
