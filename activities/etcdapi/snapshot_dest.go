package etcdapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/internal/objstore"
	"kedge.dev/kedge/internal/secretfile"

	"kedge.dev/kedge/actions/errtype"
)

// checkSnapshotInput refuses what etcd.snapshot cannot use before
// anything is asked of etcd or of a destination, and returns the cluster
// (the first segment of every key), keepFor and the destination the
// worker's operator defined under the name the run gives.
func (a *Activities) checkSnapshotInput(in etcd.SnapshotInput) (string, time.Duration, etcd.Destination, error) {
	var none etcd.Destination
	if err := checkEndpoints(in.Endpoints); err != nil {
		return "", 0, none, err
	}
	cluster := in.Vault.Cluster
	if cluster == "" || strings.Contains(cluster, "/") || objstore.ValidKey(cluster) != nil {
		return "", 0, none, invalid(fmt.Sprintf("cluster %q cannot name snapshots: letters, digits, '.', '_' and '-', starting with a letter or digit", cluster))
	}
	if in.KeepLast < 0 {
		return "", 0, none, invalid("keepLast must not be negative")
	}
	var keepFor time.Duration
	if in.KeepFor != "" {
		d, err := time.ParseDuration(in.KeepFor)
		if err != nil || d <= 0 {
			return "", 0, none, invalid(fmt.Sprintf("keepFor %q is not a positive duration", in.KeepFor))
		}
		keepFor = d
	}
	dest, err := a.destination(cluster, in.Destination)
	return cluster, keepFor, dest, err
}

// Destinations are the backup destinations the worker's operator
// defined: the backups sections of the worker's own inventories.
type Destinations interface {
	// Destination is the cluster's destination called name; an error
	// when the worker does not serve the cluster or its inventory
	// defines no such destination.
	Destination(cluster, name string) (etcd.Destination, error)
}

// destination resolves the name a run gives through the worker's
// Destinations, and checks what it finds. A run never says where a
// snapshot goes, only which of the operator's destinations: a name that
// is not one (a path, a URL) or that the worker's inventory does not
// define is refused, not retried, before anything is written or asked.
func (a *Activities) destination(cluster, name string) (etcd.Destination, error) {
	if !etcd.ValidDestinationName(name) {
		return etcd.Destination{}, refused(fmt.Sprintf("destination %q is not a destination's name: a run names one of the destinations the worker's inventory of cluster %s defines under backups:, never a path or an endpoint", name, cluster))
	}
	if a.Destinations == nil {
		return etcd.Destination{}, refused(fmt.Sprintf("destination %s: this worker knows no backup destinations (they are defined under backups: in the inventory of the cluster it serves)", name))
	}
	d, err := a.Destinations.Destination(cluster, name)
	if err != nil {
		return etcd.Destination{}, refused(fmt.Sprintf("destination %s: %v", name, err))
	}
	if err := d.Check(); err != nil {
		return etcd.Destination{}, refused(fmt.Sprintf("destination %s (the worker's inventory of cluster %s, backups.%s): %v", name, cluster, name, err))
	}
	return d, nil
}

// refused is a destination the worker will not use: not retried.
func refused(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.CredentialRefused, nil)
}

// openStore opens the checked destination: a local directory (made,
// mode 0700, when missing), or an S3 bucket whose credentials come from
// a file only its owner may read, asked once whether the bucket is there
// and the credentials work.
func openStore(ctx context.Context, d etcd.Destination) (objstore.Store, error) {
	if d.Kind == etcd.DestinationLocal {
		s, err := objstore.NewDir(d.Path)
		if err != nil {
			return nil, storeError("destination", err)
		}
		return s, nil
	}
	host, err := d.EndpointHost()
	if err != nil {
		return nil, invalid(err.Error())
	}
	access, secret, err := readS3Credentials(d.CredentialsFile)
	if err != nil {
		return nil, invalid(fmt.Sprintf("destination credentialsFile: %v", err))
	}
	var roots *x509.CertPool
	if d.CAFile != "" {
		pem, err := os.ReadFile(d.CAFile)
		if err != nil {
			return nil, invalid(fmt.Sprintf("destination caFile: %v", err))
		}
		if roots = x509.NewCertPool(); !roots.AppendCertsFromPEM(pem) {
			return nil, invalid(fmt.Sprintf("destination caFile %s holds no certificate", d.CAFile))
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
