package nodefiles

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/actions/render"
)

// SetImage gives a static pod manifest's container another image
// (render.set-image): the manifest is kept byte for byte but for the
// image's value, so that a manifest Kedge did not write (Typhoon's, a
// hand-edited one) keeps its flags, comments and order, and the undo of
// an upgrade puts back exactly what was there.
func SetImage(in render.SetImageInput) (render.SetImageResult, error) {
	var p problems
	switch {
	case in.Image != "" && in.Tag != "":
		p.add("tag", "is given with image: one or the other")
	case in.Tag != "":
		if !tagPattern.MatchString(in.Tag) {
			p.add("tag", "%q is not an image tag", in.Tag)
		}
	default:
		checkImage(&p, "image", in.Image)
	}
	if in.Manifest == "" {
		p.add("manifest", "is required")
	}
	if err := p.err(); err != nil {
		return render.SetImageResult{}, err
	}
	node, err := imageNode(in.Manifest, in.Container)
	if err != nil {
		return render.SetImageResult{}, err
	}
	if in.Tag != "" {
		in.Image = Retag(node.Value, in.Tag)
		checkImage(&p, "manifest", in.Image)
		if err := p.err(); err != nil {
			return render.SetImageResult{}, err
		}
	}
	res := render.SetImageResult{Image: in.Image, Previous: node.Value, Changed: node.Value != in.Image}
	if !res.Changed {
		res.Content = in.Manifest
		return res, nil
	}
	lines := strings.SplitAfter(in.Manifest, "\n")
	line := lines[node.Line-1]
	start := len(string([]rune(line)[:node.Column-1])) // Column counts runes
	end, err := scalarEnd(line, start)
	if err != nil {
		return render.SetImageResult{}, &FieldError{Field: "manifest", Problem: fmt.Sprintf("line %d: %v", node.Line, err)}
	}
	lines[node.Line-1] = line[:start] + in.Image + line[end:]
	res.Content = strings.Join(lines, "")
	if err := sameButImage(in.Manifest, res.Content, in.Container, in.Image); err != nil {
		return render.SetImageResult{}, &FieldError{Field: "manifest", Problem: err.Error()}
	}
	return res, nil
}

// ManifestImage is the image of a static pod manifest's container named
// container (or of its only one).
func ManifestImage(manifest, container string) (string, error) {
	n, err := imageNode(manifest, container)
	if err != nil {
		return "", err
	}
	return n.Value, nil
}

// tagPattern is what a registry takes as a tag.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Retag is image with its tag set (a digest dropped: it names the old
// content).
func Retag(image, tag string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndexByte(image, ':'); i >= 0 && !strings.Contains(image[i:], "/") {
		image = image[:i]
	}
	return image + ":" + tag
}

// imageNode finds the image value of the container named (or of the only
// container) in a pod manifest.
func imageNode(manifest, container string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(manifest), &doc); err != nil {
		return nil, &FieldError{Field: "manifest", Problem: "not YAML: " + err.Error()}
	}
	containers := lookup(&doc, "spec", "containers")
	if containers == nil || containers.Kind != yaml.SequenceNode || len(containers.Content) == 0 {
		return nil, &FieldError{Field: "manifest", Problem: "not a pod manifest: no spec.containers"}
	}
	var names []string
	var found *yaml.Node
	for _, c := range containers.Content {
		name := lookup(c, "name")
		if name == nil {
			continue
		}
		names = append(names, name.Value)
		if name.Value == container || (container == "" && len(containers.Content) == 1) {
			found = c
		}
	}
	switch {
	case found == nil && container == "":
		return nil, &FieldError{Field: "container", Problem: fmt.Sprintf("the pod has containers %s: name one", strings.Join(names, ", "))}
	case found == nil:
		return nil, &FieldError{Field: "container", Problem: fmt.Sprintf("%q is not a container of the pod (it has %s)", container, strings.Join(names, ", "))}
	}
	image := lookup(found, "image")
	if image == nil || image.Kind != yaml.ScalarNode {
		return nil, &FieldError{Field: "manifest", Problem: "the container has no image"}
	}
	if found.Style&yaml.FlowStyle != 0 || containers.Style&yaml.FlowStyle != 0 {
		return nil, &FieldError{Field: "manifest", Problem: fmt.Sprintf("line %d: an image in a flow mapping Kedge cannot rewrite in place", image.Line)}
	}
	return image, nil
}

// lookup follows mapping keys from n (a document or a mapping).
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// scalarEnd is where the scalar that starts at line[start] ends: its
// closing quote, else a comment or the line's end (trailing blanks kept
// out).
func scalarEnd(line string, start int) (int, error) {
	rest := line[start:]
	if q := rest[0]; q == '"' || q == '\'' {
		if i := strings.IndexByte(rest[1:], q); i >= 0 && !strings.Contains(rest[1:i+1], `\`) {
			return start + i + 2, nil
		}
		return 0, errors.New("a quoted image Kedge cannot rewrite in place")
	}
	end := len(rest)
	if i := strings.Index(rest, " #"); i >= 0 {
		end = i
	}
	return start + len(strings.TrimRight(rest[:end], " \t\r\n")), nil
}

// sameButImage checks that after is before with only the container's
// image changed to image.
func sameButImage(before, after, container, image string) error {
	var a, b any
	if err := yaml.Unmarshal([]byte(before), &a); err != nil {
		return err
	}
	if err := yaml.Unmarshal([]byte(after), &b); err != nil {
		return fmt.Errorf("the rewritten manifest is not YAML: %w", err)
	}
	n, err := imageNode(after, container)
	if err != nil || n.Value != image {
		return fmt.Errorf("the rewritten manifest does not run %s", image)
	}
	set := func(doc any) {
		top, _ := doc.(map[string]any)
		spec, _ := top["spec"].(map[string]any)
		cs, _ := spec["containers"].([]any)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok && (m["name"] == container || len(cs) == 1) {
				m["image"] = image
			}
		}
	}
	set(a)
	if !reflect.DeepEqual(a, b) {
		return errors.New("rewriting the image changed more than the image")
	}
	return nil
}
