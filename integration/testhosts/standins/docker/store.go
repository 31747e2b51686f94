package main

import (
	"bufio"
	"os"
	"strings"
)

// image is one line of the local image store.
type image struct {
	Name, Tag, Digest string
	Entrypoint        []string
}

// Ref is the image's NAME:TAG.
func (i image) Ref() string { return i.Name + ":" + i.Tag }

func storePath() string {
	if p := os.Getenv("KEDGE_LAB_IMAGE_STORE"); p != "" {
		return p
	}
	return "/var/lib/kedge-lab/image-store"
}

// splitRef splits NAME[:TAG][@DIGEST]; a reference with neither tag nor
// digest has the tag "latest".
func splitRef(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	// A tag follows the last colon after the last slash (a colon before it
	// is a registry's port).
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	return name, tag, digest
}

// validRef reports whether ref is a reference docker would parse: a
// lower-case name, an optional tag and an optional sha256 digest.
func validRef(ref string) bool {
	name, tag, digest := splitRef(ref)
	if name == "" || name != strings.ToLower(name) || strings.ContainsAny(name, " \t") {
		return false
	}
	if strings.Contains(ref, ":") && !strings.Contains(ref, "@") && tag == "" {
		return false
	}
	if digest != "" {
		hex, ok := strings.CutPrefix(digest, "sha256:")
		if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}

// loadStore reads the store; a missing file is an empty store.
func loadStore() ([]image, error) {
	f, err := os.Open(storePath())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []image
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		name, tag, _ := splitRef(fields[0])
		digest := fields[1]
		if digest == "-" {
			digest = ""
		}
		out = append(out, image{Name: name, Tag: tag, Digest: digest, Entrypoint: fields[2:]})
	}
	return out, sc.Err()
}

// findImage looks ref up in the store by exact reference.
func findImage(ref string) (image, bool) {
	images, err := loadStore()
	if err != nil {
		return image{}, false
	}
	name, tag, digest := splitRef(ref)
	for _, im := range images {
		if im.Name != name {
			continue
		}
		if digest != "" && digest != im.Digest {
			continue
		}
		if tag != "" && tag != im.Tag {
			continue
		}
		return im, true
	}
	return image{}, false
}
