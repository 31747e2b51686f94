package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// staticPod is a pod read from a manifest in the static pod directory.
type staticPod struct {
	file string
	pod  *corev1.Pod
	// hash identifies the pod as decoded (so reformatting a manifest
	// changes nothing, editing it restarts the pod) on this node.
	hash string
}

// key names the pod in the state and log directories: NAMESPACE_NAME.
func (p *staticPod) key() string { return podKey(p.pod.Namespace, p.pod.Name) }

func podKey(namespace, name string) string { return namespace + "_" + name }

// decodeManifest reads a manifest, YAML or JSON, as a v1 Pod, defaulting
// its namespace to "default" as the real kubelet does.
func decodeManifest(data []byte, nodeName string) (*staticPod, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty manifest")
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(data, pod); err != nil {
		return nil, err
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" {
		return nil, fmt.Errorf("apiVersion %q kind %q is not a v1 Pod", pod.APIVersion, pod.Kind)
	}
	if pod.Name == "" {
		return nil, errors.New("the pod has no name")
	}
	if pod.Namespace == "" {
		pod.Namespace = corev1.NamespaceDefault
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, errors.New("the pod has no containers")
	}
	seen := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		if c.Name == "" || seen[c.Name] || strings.ContainsAny(c.Name, "/\x00") {
			return nil, fmt.Errorf("container name %q is empty, repeated or not a file name", c.Name)
		}
		seen[c.Name] = true
	}
	canonical, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append(canonical, "\x00"+nodeName...))
	return &staticPod{pod: pod, hash: hex.EncodeToString(sum[:16])}, nil
}

// manifestReader reads the static pod directory. Like the real kubelet it
// takes every regular file whose name does not start with a dot (a
// kube-apiserver.yaml.bak left beside kube-apiserver.yaml is a manifest
// too). A file that cannot be read as a pod is reported once and keeps the
// pod it last held, so a manifest caught half-written stops nothing.
type manifestReader struct {
	dir      string
	nodeName string
	last     map[string]manifestFile // by file path
}

type manifestFile struct {
	content []byte
	pod     *staticPod // last good decoding, or nil
	err     error      // the current content's decoding error
}

// read returns the pods of the directory by key, and the problems newly
// found (a file that is no pod, a pod whose name another file took first).
func (r *manifestReader) read() (map[string]*staticPod, []error) {
	if r.last == nil {
		r.last = map[string]manifestFile{}
	}
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		r.last = map[string]manifestFile{}
		return map[string]*staticPod{}, nil
	}
	if err != nil {
		// Keep running what runs: an unreadable directory is no removal.
		pods := map[string]*staticPod{}
		for _, f := range r.last {
			if f.pod != nil {
				pods[f.pod.key()] = f.pod
			}
		}
		return pods, []error{fmt.Errorf("static pod path %s: %w", r.dir, err)}
	}
	var problems []error
	files := map[string]manifestFile{}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	pods := map[string]*staticPod{}
	for _, name := range names {
		path := filepath.Join(r.dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			continue // removed since listed
		}
		prev, known := r.last[path]
		f := prev
		if !known || !bytes.Equal(prev.content, data) {
			f.content = data
			p, err := decodeManifest(data, r.nodeName)
			f.err = err
			if err == nil {
				p.file = path
				f.pod = p
			} else {
				problems = append(problems, fmt.Errorf("static pod manifest %s: %w", path, err))
			}
		}
		files[path] = f
		if f.pod == nil {
			continue
		}
		if other, taken := pods[f.pod.key()]; taken {
			if !known || !bytes.Equal(prev.content, data) {
				problems = append(problems, fmt.Errorf("static pod manifest %s: pod %s/%s is defined by %s already; ignored",
					path, f.pod.pod.Namespace, f.pod.pod.Name, other.file))
			}
			continue
		}
		pods[f.pod.key()] = f.pod
	}
	r.last = files
	return pods, problems
}
