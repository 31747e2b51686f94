package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// list is `ctr images ls`.
func (a *app) list(args []string) int {
	f, filters, err := parseFlags(lsFlags, args)
	if err != nil {
		return a.usageError("ls", err)
	}
	if len(filters) > 0 {
		return a.fail("the Kedge test world's ctr stand-in takes no filters (got %q)", filters)
	}
	if err := a.dial(); err != nil {
		return a.fail("%v", err)
	}
	if err := validNamespace(a.namespace); err != nil {
		return a.fail("failed to list images: %v", err)
	}
	images, err := a.storeImages()
	if err != nil {
		return a.fail("failed to list images: %v", err)
	}
	if f.has("quiet") {
		for _, im := range images {
			fmt.Fprintln(a.stdout, im.Ref())
		}
		return 0
	}
	tw := tabwriter.NewWriter(a.stdout, 1, 8, 1, ' ', 0)
	fmt.Fprintln(tw, "REF\tTYPE\tDIGEST\tSIZE\tPLATFORMS\tLABELS\t")
	for _, im := range images {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", im.Ref(), "application/vnd.oci.image.index.v1+json",
			im.digest(), byteCount(im.size()), "linux/amd64", "-")
	}
	tw.Flush()
	return 0
}

// pull is `ctr images pull`.
func (a *app) pull(args []string) int {
	f, refs, err := parseFlags(pullFlags, args)
	if err != nil {
		return a.usageError("pull", err)
	}
	switch {
	case len(refs) == 0:
		return a.fail("please provide an image reference to pull")
	case len(refs) > 1:
		// Real ctr pulls the first and says nothing of the rest (flags
		// after the reference among them): refused, so that no one
		// counts on them.
		return a.fail("the Kedge test world's ctr stand-in pulls exactly one reference, got %d: %q (real ctr ignores all but the first)", len(refs), refs)
	}
	ref := refs[0]
	if err := a.dial(); err != nil {
		return a.fail("%v", err)
	}
	if err := validNamespace(a.namespace); err != nil {
		return a.fail("%v", err)
	}
	amd64 := len(f["platform"]) == 0
	for _, p := range f["platform"] {
		ok, err := isAMD64(p)
		if err != nil {
			return a.fail("invalid platform %s: %v", p, err)
		}
		amd64 = amd64 || ok
	}
	s, err := parseRef(ref)
	if err != nil {
		return a.fail("failed to resolve reference %q: %v", ref, err)
	}
	images, err := a.storeImages()
	if err != nil {
		return a.fail("failed to resolve reference %q: %v", ref, err)
	}
	im, ok := find(images, s)
	if !ok {
		// No registry answers: its host does not resolve.
		reqErr := fmt.Sprintf("failed to do request: Head %q: dial tcp: lookup %s: no such host", s.registryURL(), hostOnly(s.registryHost()))
		fmt.Fprintf(a.stderr, "time=%q level=info msg=\"trying next host\" error=%s host=%s\n", a.now().Format(time.RFC3339), strconv.Quote(reqErr), s.registryHost())
		return a.fail("failed to resolve reference %q: %s", ref, reqErr)
	}
	if !amd64 {
		return a.fail("no match for platform in manifest: not found")
	}
	if err := a.recordPull(ref); err != nil {
		return a.fail("the Kedge test world's ctr stand-in could not record the pull: %v", err)
	}
	a.printPull(ref, im)
	return 0
}

// printPull prints what ctr prints once a pull is done (when its output is
// not a terminal, the last of its progress tables).
func (a *app) printPull(ref string, im image) {
	const bar = "|" + "++++++++++++++++++++++++++++++++++++++" + "|"
	tw := tabwriter.NewWriter(a.stdout, 1, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "%s:\t%s\t%s\t\n", ref, "resolved", bar)
	for _, part := range []string{"index", "manifest", "config", "layer"} {
		fmt.Fprintf(tw, "%s-%s:\t%s\t%s\t\n", part, im.partDigest(part), "done", bar)
	}
	const elapsed = 100 * time.Millisecond
	size := im.size()
	fmt.Fprintf(tw, "elapsed: %-4.1fs\ttotal: %7.6v\t(%v/s)\t\n", elapsed.Seconds(), byteCount(size), byteCount(int64(float64(size)/elapsed.Seconds())))
	tw.Flush()
	fmt.Fprintf(a.stdout, "unpacking linux/amd64 %s...\n", im.digest())
	fmt.Fprintf(a.stdout, "done: %v\n", 37*time.Millisecond)
}

// recordPull appends "TIME ctr REFERENCE" to the pull log.
func (a *app) recordPull(ref string) error {
	f, err := os.OpenFile(a.pullLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s ctr %s\n", a.now().UTC().Format(time.RFC3339Nano), ref); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// digest is the image's digest, or one made from its reference when the
// store has none.
func (im image) digest() string {
	if im.Digest != "" {
		return im.Digest
	}
	s := sha256.Sum256([]byte(im.Ref()))
	return "sha256:" + hex.EncodeToString(s[:])
}

// partDigest is a made-up digest of one of the image's parts; the index is
// the image's own.
func (im image) partDigest(part string) string {
	if part == "index" {
		return im.digest()
	}
	s := sha256.Sum256([]byte(im.digest() + " " + part))
	return "sha256:" + hex.EncodeToString(s[:])
}

// size is a made-up size, 10 to 60 MiB, the same for the same image.
func (im image) size() int64 {
	s := sha256.Sum256([]byte(im.digest()))
	return 10<<20 + int64(s[0])<<17 + int64(s[1])<<9
}

// byteCount formats a size as containerd's progress.Bytes does.
type byteCount int64

func (b byteCount) String() string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(b), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

var (
	identifier          = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`)
	platformComponent   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	maxIdentifierLength = 76
)

// validNamespace checks a namespace name as containerd does.
func validNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("namespace is required: failed precondition")
	case len(ns) > maxIdentifierLength:
		return fmt.Errorf("namespace validation: identifier %q greater than maximum length (%d characters): invalid argument", ns, maxIdentifierLength)
	case !identifier.MatchString(ns):
		return fmt.Errorf("namespace validation: identifier %q must match %v: invalid argument", ns, identifier)
	}
	return nil
}

// isAMD64 parses a platform specifier as containerd does and says whether
// it names linux/amd64, the only platform of the test world's images.
func isAMD64(p string) (bool, error) {
	parts := strings.Split(p, "/")
	for _, c := range parts {
		if !platformComponent.MatchString(c) {
			return false, fmt.Errorf("%q is an invalid component of %q: platform specifier component must match %q: invalid argument", c, p, platformComponent.String())
		}
	}
	if len(parts) > 3 {
		return false, fmt.Errorf("%q: cannot parse platform specifier: invalid argument", p)
	}
	switch strings.ToLower(p) {
	case "amd64", "x86_64", "x86-64", "linux/amd64", "linux/x86_64", "linux/x86-64":
		return true, nil
	}
	return false, nil
}

// hostOnly is a registry host without its port, as a DNS lookup names it.
func hostOnly(host string) string {
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.Contains(host[i:], "]") {
		return host[:i]
	}
	return host
}
