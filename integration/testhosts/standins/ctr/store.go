package main

import (
	"bufio"
	"errors"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// criNamespace is the containerd namespace the kubelet's images are in:
// the only one with images in the test world.
const criNamespace = "k8s.io"

// image is one line of the store: REFERENCE (NAME:TAG) and DIGEST.
type image struct {
	Name, Tag, Digest string
}

// Ref is the image's NAME:TAG.
func (i image) Ref() string { return i.Name + ":" + i.Tag }

func (a *app) storePath() string {
	return a.envOr("KEDGE_LAB_CRI_IMAGE_STORE", "/var/lib/kedge-lab/cri-image-store")
}

// pullLog is the docker stand-in's pull log, beside the store (testhosts
// PullLog).
func (a *app) pullLog() string { return filepath.Join(filepath.Dir(a.storePath()), "pulls") }

// images is the namespace's images: the store's for k8s.io (a missing file
// is an empty store), none for any other.
func (a *app) storeImages() ([]image, error) {
	if a.namespace != criNamespace {
		return nil, nil
	}
	f, err := os.Open(a.storePath())
	if errors.Is(err, os.ErrNotExist) {
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
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		name, _, _ := strings.Cut(fields[0], "@")
		tag := "latest"
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			name, tag = name[:i], name[i+1:]
		}
		digest := fields[1]
		if digest == "-" {
			digest = ""
		}
		out = append(out, image{Name: name, Tag: tag, Digest: digest})
	}
	return out, sc.Err()
}

// spec is a reference as containerd reads it (its reference.Spec): a
// locator HOST/PATH and an object, TAG, TAG@DIGEST or @DIGEST.
type spec struct {
	Locator, Object string
}

// The errors of containerd's reference parsing and of the digests it
// checks, with their messages.
var (
	errInvalid          = errors.New("invalid reference")
	errHostnameRequired = errors.New("hostname required")
	errObjectRequired   = errors.New("object required")
	errDigestFormat     = errors.New("invalid checksum digest format")
	errDigestLength     = errors.New("invalid checksum digest length")
	errDigestAlgorithm  = errors.New("unsupported digest algorithm")
)

var objectStart = regexp.MustCompile(`[:@]`)

// parseRef parses ref as ctr's resolver does before it asks a registry:
// the first component is the registry's host, whatever it looks like, and
// no default registry, repository or tag is filled in.
func parseRef(ref string) (spec, error) {
	if strings.Contains(ref, "://") {
		return spec{}, errInvalid
	}
	u, err := url.Parse("dummy://" + ref)
	if err != nil {
		return spec{}, err
	}
	if u.Scheme != "dummy" {
		return spec{}, errInvalid
	}
	if u.Host == "" {
		return spec{}, errHostnameRequired
	}
	var object string
	if idx := objectStart.FindStringIndex(u.Path); idx != nil {
		object = strings.TrimPrefix(u.Path[idx[0]:], ":")
		u.Path = u.Path[:idx[0]]
	}
	s := spec{Locator: path.Join(u.Host, u.Path), Object: object}
	if s.Object == "" {
		return spec{}, errObjectRequired
	}
	if d := s.Digest(); d != "" {
		if err := validateDigest(d); err != nil {
			return spec{}, err
		}
	}
	return s, nil
}

// Hostname is the locator's first component.
func (s spec) Hostname() string {
	host, _, _ := strings.Cut(s.Locator, "/")
	return host
}

// Tag is the object's tag ("" when it is @DIGEST only).
func (s spec) Tag() string {
	tag, _, _ := strings.Cut(s.Object, "@")
	return tag
}

// Digest is the object's digest, "" when it has none.
func (s spec) Digest() string {
	_, d, _ := strings.Cut(s.Object, "@")
	return d
}

// validateDigest checks ALGORITHM:HEX as the OCI digest package does.
func validateDigest(d string) error {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok || alg == "" || hex == "" {
		return errDigestFormat
	}
	size, known := map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}[alg]
	if !known {
		return errDigestAlgorithm
	}
	if len(hex) != size {
		return errDigestLength
	}
	if strings.Trim(hex, "0123456789abcdef") != "" {
		return errDigestFormat
	}
	return nil
}

// registryHost is the host ctr asks for the reference: its hostname, but
// registry-1.docker.io for docker.io.
func (s spec) registryHost() string {
	if h := s.Hostname(); h != "docker.io" {
		return h
	}
	return "registry-1.docker.io"
}

// registryURL is the URL ctr asks first for the reference's manifest.
func (s spec) registryURL() string {
	repo := strings.TrimPrefix(s.Locator, s.Hostname()+"/")
	host := s.registryHost()
	obj := s.Object
	if d := s.Digest(); d != "" {
		obj = d
	}
	return "https://" + host + "/v2/" + repo + "/manifests/" + obj
}

// find looks the reference up among images: same name, and the same tag
// and digest where the reference has them.
func find(images []image, s spec) (image, bool) {
	for _, im := range images {
		if im.Name != s.Locator {
			continue
		}
		if t := s.Tag(); t != "" && t != im.Tag {
			continue
		}
		if d := s.Digest(); d != "" && d != im.Digest {
			continue
		}
		return im, true
	}
	return image{}, false
}
