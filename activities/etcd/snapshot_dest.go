package etcd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	api "kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/secretfile"
)

// checkSnapshotInput refuses what etcd.snapshot cannot use before
// anything is asked of etcd, and returns the cluster (the first segment
// of every key) and keepFor.
func checkSnapshotInput(in SnapshotInput) (string, time.Duration, error) {
	if err := checkEndpoints(in.Endpoints); err != nil {
		return "", 0, err
	}
	cluster := in.Vault.Cluster
	if cluster == "" || strings.Contains(cluster, "/") || objstore.ValidKey(cluster) != nil {
		return "", 0, invalid(fmt.Sprintf("cluster %q cannot name snapshots: letters, digits, '.', '_' and '-', starting with a letter or digit", cluster))
	}
	if in.KeepLast < 0 {
		return "", 0, invalid("keepLast must not be negative")
	}
	var keepFor time.Duration
	if in.KeepFor != "" {
		d, err := time.ParseDuration(in.KeepFor)
		if err != nil || d <= 0 {
			return "", 0, invalid(fmt.Sprintf("keepFor %q is not a positive duration", in.KeepFor))
		}
		keepFor = d
	}
	if err := checkDestination(in.Destination); err != nil {
		return "", 0, err
	}
	return cluster, keepFor, nil
}

// bucketName is S3's rule for bucket names (no dots next to each other
// or to a dash is left to the server).
var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	regionName = regexp.MustCompile(`^[a-z0-9-]{0,32}$`)
)

// checkDestination refuses a destination before any of its values
// reaches a path or a URL: a local path that is not absolute and clean;
// an S3 endpoint that is not https://HOST[:PORT] (http:// only with
// insecure), a bucket or region outside S3's names, a credentials or CA
// file that is not an absolute clean path.
func checkDestination(d api.Destination) error {
	switch d.Kind {
	case api.DestinationLocal:
		if err := checkPath("destination.path", d.Path, true); err != nil {
			return err
		}
		if d.Endpoint != "" || d.Bucket != "" || d.CredentialsFile != "" {
			return invalid("a local destination takes a path only")
		}
		return nil
	case api.DestinationS3:
		if _, err := endpointHost(d); err != nil {
			return err
		}
		if !bucketName.MatchString(d.Bucket) || strings.Contains(d.Bucket, "..") {
			return invalid(fmt.Sprintf("destination.bucket %q is not an S3 bucket name (3 to 63 lowercase letters, digits, '.' and '-')", d.Bucket))
		}
		if !regionName.MatchString(d.Region) {
			return invalid(fmt.Sprintf("destination.region %q is not a region name", d.Region))
		}
		if err := checkPath("destination.credentialsFile", d.CredentialsFile, true); err != nil {
			return err
		}
		if d.Path != "" {
			return invalid("an s3 destination takes no path")
		}
		return checkPath("destination.caFile", d.CAFile, false)
	}
	return invalid(fmt.Sprintf("destination.kind %q: want %s or %s", d.Kind, api.DestinationLocal, api.DestinationS3))
}

func checkPath(name, p string, required bool) error {
	switch {
	case p == "" && !required:
		return nil
	case p == "":
		return invalid(name + " is required")
	case !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0):
		return invalid(fmt.Sprintf("%s %q is not an absolute, clean path on the worker", name, p))
	}
	return nil
}

// endpointHost is the S3 endpoint's HOST[:PORT], checked.
func endpointHost(d api.Destination) (string, error) {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
		u.Hostname() == "" || strings.ContainsAny(u.Host, " \t") {
		return "", invalid(fmt.Sprintf("destination.endpoint %q is not https://HOST[:PORT]", d.Endpoint))
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && d.Insecure:
	case u.Scheme == "http":
		return "", invalid(fmt.Sprintf("destination.endpoint %q is plain http: refused unless insecure is set", d.Endpoint))
	default:
		return "", invalid(fmt.Sprintf("destination.endpoint %q is not https://HOST[:PORT]", d.Endpoint))
	}
	return u.Host, nil
}

// openStore opens the checked destination: a local directory (made,
// mode 0700, when missing), or an S3 bucket whose credentials come from
// a file only its owner may read, asked once whether the bucket is there
// and the credentials work.
func openStore(ctx context.Context, d api.Destination) (objstore.Store, error) {
	if d.Kind == api.DestinationLocal {
		s, err := objstore.NewDir(d.Path)
		if err != nil {
			return nil, storeError("destination", err)
		}
		return s, nil
	}
	host, err := endpointHost(d)
	if err != nil {
		return nil, err
	}
	access, secret, err := readS3Credentials(d.CredentialsFile)
	if err != nil {
		return nil, invalid(fmt.Sprintf("destination.credentialsFile: %v", err))
	}
	var roots *x509.CertPool
	if d.CAFile != "" {
		pem, err := os.ReadFile(d.CAFile)
		if err != nil {
			return nil, invalid(fmt.Sprintf("destination.caFile: %v", err))
		}
		if roots = x509.NewCertPool(); !roots.AppendCertsFromPEM(pem) {
			return nil, invalid(fmt.Sprintf("destination.caFile %s holds no certificate", d.CAFile))
		}
	}
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: host, Bucket: d.Bucket, Region: d.Region, Secure: !strings.HasPrefix(d.Endpoint, "http:"),
		RootCAs: roots, AccessKey: access, SecretKey: secret})
	if err != nil {
		return nil, invalid(fmt.Sprintf("destination: %v", err))
	}
	if err := s3.Check(ctx); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, invalid(fmt.Sprintf("destination: %v (create the bucket first)", err))
		}
		return nil, storeError("destination "+d.Endpoint, err)
	}
	return s3, nil
}

// readS3Credentials reads the access key and secret from a file only its
// owner may read: "aws_access_key_id = ..." and "aws_secret_access_key =
// ..." lines, outside any section or in [default] (an AWS shared
// credentials file). Its errors never hold the secret.
func readS3Credentials(path string) (string, string, error) {
	data, err := secretfile.Read(path)
	if err != nil {
		return "", "", err
	}
	var access, secret string
	section := "default"
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, ";"):
			continue
		case strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]"):
			section = strings.TrimSpace(text[1 : len(text)-1])
			continue
		case section != "default":
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			return "", "", fmt.Errorf("%s:%d: want KEY = VALUE", path, line)
		}
		switch strings.TrimSpace(k) {
		case "aws_access_key_id":
			access = strings.TrimSpace(v)
		case "aws_secret_access_key":
			secret = strings.TrimSpace(v)
		}
	}
	if access == "" || secret == "" {
		return "", "", fmt.Errorf("%s has no aws_access_key_id and aws_secret_access_key (in [default] or before any section)", path)
	}
	return access, secret, nil
}
