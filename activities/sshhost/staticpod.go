package sshhost

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"time"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
)

// RestartStaticPod makes the kubelet restart a static pod
// (host.restart-static-pod) — after its certificates were renewed, say —
// by setting layout.RestartedAtAnnotation in its manifest. Nothing else in the file
// changes: its fields, their order and comments stay (indentation is
// written as two spaces). The write is
// atomic (a dot-file staged beside it, which the kubelet ignores) and
// keeps the previous content for host.restore-file. With StopKubelet the
// kubelet is stopped before the write and started after it.
func (a *Activities) RestartStaticPod(ctx context.Context, in host.RestartStaticPodInput) (host.RestartStaticPodResult, error) {
	res, err := a.restartStaticPod(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) restartStaticPod(ctx context.Context, in host.RestartStaticPodInput) (_ host.RestartStaticPodResult, err error) {
	if err := checkPath(in.Manifest); err != nil {
		return host.RestartStaticPodResult{}, err
	}
	if ext := path.Ext(in.Manifest); ext != ".yaml" && ext != ".yml" {
		return host.RestartStaticPodResult{}, invalid(fmt.Sprintf("manifest %q is not a .yaml file", in.Manifest))
	}
	at := in.At
	if at == "" {
		at = time.Now().UTC().Format(time.RFC3339Nano)
	} else if _, err := time.Parse(time.RFC3339, at); err != nil {
		return host.RestartStaticPodResult{}, invalid(fmt.Sprintf("at %q is not an RFC 3339 time", at))
	}
	if in.StopKubelet {
		if _, err := a.systemd(ctx, host.SystemdInput{Target: in.Target, Unit: "kubelet.service", Action: "stop"}); err != nil {
			return host.RestartStaticPodResult{}, err
		}
		// Started again whatever happens to the manifest, even when the
		// activity is cancelled: a retry stops it again first.
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if _, serr := a.systemd(ctx, host.SystemdInput{Target: in.Target, Unit: "kubelet.service", Action: "start"}); serr != nil && err == nil {
				err = serr
			}
		}()
	}
	cur, err := a.readFile(ctx, host.ReadFileInput{Target: in.Target, Path: in.Manifest})
	if err != nil {
		return host.RestartStaticPodResult{}, err
	}
	out, err := annotate([]byte(cur.Content), layout.RestartedAtAnnotation, at)
	if err != nil {
		return host.RestartStaticPodResult{}, invalid(fmt.Sprintf("%s on %s: %v", in.Manifest, in.Target.Name(), err))
	}
	w, err := a.writeFile(ctx, host.WriteFileInput{Target: in.Target, Path: in.Manifest, Content: string(out), Mode: cur.Mode})
	return host.RestartStaticPodResult{RestartedAt: at, Changed: w.Changed, Backup: w.Backup}, err
}

// annotate sets metadata.annotations[key] = value in a pod manifest,
// leaving the rest of the document as it is.
func annotate(doc []byte, key, value string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a single YAML mapping")
	}
	pod := root.Content[0]
	if kind := lookup(pod, "kind"); kind == nil || kind.Value != "Pod" {
		return nil, fmt.Errorf("not a Pod")
	}
	meta := child(pod, "metadata")
	ann := child(meta, "annotations")
	if v := lookup(ann, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, "!!str", value, yaml.DoubleQuotedStyle
	} else {
		ann.Content = append(ann.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: yaml.DoubleQuotedStyle})
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// child is the mapping under key, made when missing or null.
func child(m *yaml.Node, key string) *yaml.Node {
	if v := lookup(m, key); v != nil {
		if v.Kind != yaml.MappingNode {
			*v = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		return v
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}
