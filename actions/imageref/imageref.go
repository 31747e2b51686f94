// Package imageref checks container image references the one way Kedge
// accepts them: a reference a runtime can pull, pinned by a tag or a
// digest (the image is what a runbook or an upgrade pins).
package imageref

import (
	"fmt"

	"github.com/distribution/reference"
)

// Check returns why s is not an image reference pinned by a tag or a
// digest, nil when it is.
func Check(s string) error {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return fmt.Errorf("%q is not an image reference: %w", s, err)
	}
	if reference.IsNameOnly(named) {
		return fmt.Errorf("image %q needs a tag or a digest", s)
	}
	return nil
}

// Full is s (checked by Check) named in full, as containerd and the
// kubelet's CRI name an image: a reference without a registry is Docker
// Hub's, docker.io/library/ for an official image.
func Full(s string) (string, error) {
	if err := Check(s); err != nil {
		return "", err
	}
	named, _ := reference.ParseNormalizedNamed(s)
	return named.String(), nil
}
