package objstore

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestS3ErrorClasses(t *testing.T) {
	for _, c := range []struct {
		resp minio.ErrorResponse
		want error
	}{
		{minio.ErrorResponse{Code: minio.NoSuchKey, StatusCode: http.StatusNotFound}, ErrNotFound},
		{minio.ErrorResponse{Code: minio.NoSuchBucket, StatusCode: http.StatusNotFound}, ErrNotFound},
		{minio.ErrorResponse{Code: minio.SignatureDoesNotMatch, StatusCode: http.StatusForbidden}, ErrDenied},
		{minio.ErrorResponse{Code: minio.InvalidAccessKeyID, StatusCode: http.StatusForbidden}, ErrDenied},
		{minio.ErrorResponse{Code: minio.AccessDenied, StatusCode: http.StatusForbidden}, ErrDenied},
		{minio.ErrorResponse{StatusCode: http.StatusForbidden}, ErrDenied},
		{minio.ErrorResponse{Code: "InternalError", StatusCode: http.StatusInternalServerError}, nil},
	} {
		err := s3Error("put", "k", c.resp)
		for _, class := range []error{ErrNotFound, ErrDenied} {
			if got := errors.Is(err, class); got != (class == c.want) {
				t.Errorf("%s %d: errors.Is(%v) = %v", c.resp.Code, c.resp.StatusCode, class, got)
			}
		}
		var resp minio.ErrorResponse
		if !errors.As(err, &resp) || resp.Code != c.resp.Code {
			t.Errorf("%s: the server's error is not kept: %v", c.resp.Code, err)
		}
	}
}

func TestNewS3Refuses(t *testing.T) {
	ok := S3Config{Endpoint: "127.0.0.1:9000", Bucket: "b", AccessKey: "a", SecretKey: "s3cr3t"}
	for name, mod := range map[string]func(*S3Config){
		"scheme":    func(c *S3Config) { c.Endpoint = "https://s3.example.test" },
		"no host":   func(c *S3Config) { c.Endpoint = "" },
		"no bucket": func(c *S3Config) { c.Bucket = "" },
		"no key":    func(c *S3Config) { c.AccessKey = "" },
		"no secret": func(c *S3Config) { c.SecretKey = "" },
	} {
		c := ok
		mod(&c)
		if _, err := NewS3(c); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the secret is in the error", name)
		}
	}
	if _, err := NewS3(ok); err != nil {
		t.Fatal(err)
	}
}

// Keys are checked before the network: a store whose server does not
// exist refuses them at once, with the same error as Dir.
func TestS3KeysCheckedFirst(t *testing.T) {
	s, err := NewS3(S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range attackerKeys {
		if err := s.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v", key, err)
		}
	}
	if _, err := s.List(ctx, "../"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("List(../) = %v", err)
	}
}
