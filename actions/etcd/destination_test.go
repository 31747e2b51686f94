package etcd

import (
	"errors"
	"strings"
	"testing"
)

// A destination's values reach a path or a URL only once checked; each
// refusal names the field it is about.
func TestDestinationCheck(t *testing.T) {
	local := Destination{Kind: DestinationLocal, Path: "/var/lib/kedge/backups"}
	s3 := Destination{Kind: DestinationS3, Endpoint: "https://s3.example:9000", Bucket: "kedge-backups", CredentialsFile: "/etc/kedge/s3.credentials"}
	for _, ok := range []Destination{local, s3,
		{Kind: DestinationS3, Endpoint: "http://127.0.0.1:8333", Insecure: true, Bucket: "b.c-d", Region: "us-east-1", CredentialsFile: "/c", CAFile: "/ca.pem"}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	l := func(f func(*Destination)) Destination { d := local; f(&d); return d }
	s := func(f func(*Destination)) Destination { d := s3; f(&d); return d }
	for _, c := range []struct {
		name  string
		d     Destination
		field string
		says  string
	}{
		{"no kind", Destination{Path: "/tmp"}, "kind", `kind "": want local or s3`},
		{"a relative path", l(func(d *Destination) { d.Path = "backups" }), "path", `path "backups" is not an absolute, clean path on the worker`},
		{"a path with ..", l(func(d *Destination) { d.Path = "/var/lib/../../etc" }), "path", "is not an absolute, clean path"},
		{"no path", l(func(d *Destination) { d.Path = "" }), "path", "path is required"},
		{"a local path with a bucket", l(func(d *Destination) { d.Bucket = "b" }), "kind", "kind local takes a path only"},
		{"plain http", s(func(d *Destination) { d.Endpoint = "http://s3.example:9000" }), "endpoint", "is plain http: refused unless insecure is set"},
		{"another scheme", s(func(d *Destination) { d.Endpoint = "file:///etc" }), "endpoint", "is not https://HOST[:PORT]"},
		{"an endpoint with a path", s(func(d *Destination) { d.Endpoint = "https://s3.example/other" }), "endpoint", "is not https://HOST[:PORT]"},
		{"an endpoint with a user", s(func(d *Destination) { d.Endpoint = "https://me:pw@s3.example" }), "endpoint", "is not https://HOST[:PORT]"},
		{"an endpoint with a query", s(func(d *Destination) { d.Endpoint = "https://s3.example?x=1" }), "endpoint", "is not https://HOST[:PORT]"},
		{"a bucket with a slash", s(func(d *Destination) { d.Bucket = "a/b" }), "bucket", `bucket "a/b" is not an S3 bucket name`},
		{"a bucket in capitals", s(func(d *Destination) { d.Bucket = "Backups" }), "bucket", "is not an S3 bucket name"},
		{"a bucket with ..", s(func(d *Destination) { d.Bucket = "a..b" }), "bucket", "is not an S3 bucket name"},
		{"a region with a slash", s(func(d *Destination) { d.Region = "us/east" }), "region", `region "us/east" is not a region name`},
		{"an s3 destination with a path", s(func(d *Destination) { d.Path = "/tmp" }), "path", "path is not taken by an s3 destination"},
		{"no credentials file", s(func(d *Destination) { d.CredentialsFile = "" }), "credentialsFile", "credentialsFile is required"},
		{"a relative credentials file", s(func(d *Destination) { d.CredentialsFile = "creds" }), "credentialsFile", `credentialsFile "creds" is not an absolute`},
		{"a relative CA file", s(func(d *Destination) { d.CAFile = "../ca.pem" }), "caFile", `caFile "../ca.pem" is not an absolute`},
	} {
		err := c.d.Check()
		var de *DestinationError
		if !errors.As(err, &de) || de.Field != c.field || !strings.Contains(de.Msg, c.says) {
			t.Errorf("%s: %v, want field %s saying %q", c.name, err, c.field, c.says)
		}
	}
}

// A name can never be a path or a URL.
func TestValidDestinationName(t *testing.T) {
	for _, ok := range []string{"local", "offsite", "s3-eu-1", "a"} {
		if !ValidDestinationName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "/var/backups", "https://s3.example", "local/../x", "..", "Local", "-a", "a_b", "a.b"} {
		if ValidDestinationName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
