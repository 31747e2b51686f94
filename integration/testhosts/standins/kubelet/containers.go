package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// sleepForever is what a container of an image the map does not know runs,
// as under the container stand-in.
var sleepForever = []string{"/bin/sleep", "2147483647"}

// defaultPath is a container's PATH when the kubelet has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageProgram maps an image to the program (and leading arguments) the
// images file names for it: the first line "IMAGE-PREFIX PROGRAM [ARGS...]"
// whose prefix starts the image, the container stand-in's rule. It returns
// nil when no line matches or the file is missing.
func imageProgram(imagesFile, image string) []string {
	f, err := os.Open(imagesFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if strings.HasPrefix(image, fields[0]) {
			return fields[1:]
		}
	}
	return nil
}

// process is how a container runs as a process on the host.
type process struct {
	argv []string
	env  []string
	dir  string
	// mapped is false when the image is not in the map and the container
	// sleeps instead.
	mapped bool
	// user is who the process runs as (nil: root); refused is why it must
	// not start at all (the kubelet's CreateContainerConfigError).
	user    *runAs
	refused error
}

// containerProcess maps a container of a static pod to its process: the
// image's program, then the container's command after its first word (the
// program's name inside the image, e.g. `kube-apiserver`) and its args,
// with $(VAR) references to its environment expanded as the kubelet does.
// The environment is PATH, KEDGE_LAB_IMAGE (the image, as the container
// stand-in sets it) and the container's env.
func containerProcess(c corev1.Container, pod *corev1.Pod, n *node, imagesFile string) process {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path, "HOME=/root", "KEDGE_LAB_IMAGE=" + c.Image}
	vars := map[string]string{}
	for _, e := range c.Env {
		v, ok := e.Value, true
		if e.ValueFrom != nil {
			v, ok = fieldValue(e.ValueFrom, pod, n)
		} else {
			v = expandVars(v, vars)
		}
		if ok {
			vars[e.Name] = v
			env = append(env, e.Name+"="+v)
		}
	}
	var args []string
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	args = append(args, c.Args...)
	for i, a := range args {
		args[i] = expandVars(a, vars)
	}
	p := process{env: env, dir: c.WorkingDir}
	p.user, p.refused = containerRunAs(c, pod)
	if prog := imageProgram(imagesFile, c.Image); prog != nil {
		p.argv = append(append([]string{}, prog...), args...)
		p.mapped = true
	} else {
		p.argv = append([]string{}, sleepForever...)
	}
	return p
}

// fieldValue resolves the downward-API fields a static pod can use. Other
// sources (secrets, config maps, resources) are unavailable to static pods.
func fieldValue(src *corev1.EnvVarSource, pod *corev1.Pod, n *node) (string, bool) {
	if src.FieldRef == nil {
		return "", false
	}
	switch src.FieldRef.FieldPath {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "spec.nodeName":
		return n.name, true
	case "status.hostIP", "status.podIP":
		return n.hostIP(), true
	}
	return "", false
}

// expandVars expands $(NAME) from vars the way the kubelet expands
// command, args and env: an undefined $(NAME) stays as written, and $$ is
// a literal $.
func expandVars(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// logPath is where a static pod container's output goes.
func logPath(logsDir string, pod *corev1.Pod, container string) string {
	return filepath.Join(logsDir, podKey(pod.Namespace, pod.Name), container+".log")
}
