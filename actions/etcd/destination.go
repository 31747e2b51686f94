package etcd

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// destinationName is the rule for a destination's name: a DNS label
// (lowercase letters, digits and '-', at most 63), so a name can never
// be a path or a URL.
var destinationName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidDestinationName reports whether name can name a destination.
func ValidDestinationName(name string) bool { return destinationName.MatchString(name) }

// DestinationError is a destination's value Kedge will not use; Field
// names it as the inventory spells it (path, endpoint, bucket, ...).
type DestinationError struct {
	Field string
	Msg   string
}

func (e *DestinationError) Error() string { return e.Msg }

// S3 names: a bucket (no dots next to each other or to a dash is left to
// the server) and a region.
var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	regionName = regexp.MustCompile(`^[a-z0-9-]{0,32}$`)
)

// Check refuses a destination before any of its values reaches a path
// or a URL: a local path that is not absolute and clean; an S3 endpoint
// that is not https://HOST[:PORT] (http:// only with insecure), a bucket
// or region outside S3's names, a credentials or CA file that is not an
// absolute clean path; a field the kind does not take.
func (d Destination) Check() error {
	bad := func(field, format string, args ...any) error {
		return &DestinationError{Field: field, Msg: field + " " + fmt.Sprintf(format, args...)}
	}
	switch d.Kind {
	case DestinationLocal:
		if d.Endpoint != "" || d.Bucket != "" || d.Region != "" || d.CredentialsFile != "" || d.CAFile != "" || d.Insecure {
			return bad("kind", "local takes a path only")
		}
		return checkPath("path", d.Path, true)
	case DestinationS3:
		if _, err := d.EndpointHost(); err != nil {
			return err
		}
		if !bucketName.MatchString(d.Bucket) || strings.Contains(d.Bucket, "..") {
			return bad("bucket", "%q is not an S3 bucket name (3 to 63 lowercase letters, digits, '.' and '-')", d.Bucket)
		}
		if !regionName.MatchString(d.Region) {
			return bad("region", "%q is not a region name", d.Region)
		}
		if d.Path != "" {
			return bad("path", "is not taken by an s3 destination")
		}
		if err := checkPath("credentialsFile", d.CredentialsFile, true); err != nil {
			return err
		}
		return checkPath("caFile", d.CAFile, false)
	}
	return bad("kind", "%q: want %s or %s", d.Kind, DestinationLocal, DestinationS3)
}

func checkPath(field, p string, required bool) error {
	switch {
	case p == "" && !required:
		return nil
	case p == "":
		return &DestinationError{Field: field, Msg: field + " is required"}
	case !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0):
		return &DestinationError{Field: field, Msg: fmt.Sprintf("%s %q is not an absolute, clean path on the worker", field, p)}
	}
	return nil
}

// EndpointHost is the S3 endpoint's HOST[:PORT], checked.
func (d Destination) EndpointHost() (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", &DestinationError{Field: "endpoint", Msg: "endpoint " + fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
		u.Hostname() == "" || strings.ContainsAny(u.Host, " \t") {
		return bad("%q is not https://HOST[:PORT]", d.Endpoint)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && d.Insecure:
	case u.Scheme == "http":
		return bad("%q is plain http: refused unless insecure is set", d.Endpoint)
	default:
		return bad("%q is not https://HOST[:PORT]", d.Endpoint)
	}
	return u.Host, nil
}
