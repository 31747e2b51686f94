package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultPartSize is the size of the parts an S3 Put uploads: the one
// buffer it holds in memory. 10,000 parts (S3's limit) make 160 GiB, far
// above etcd's largest database.
const DefaultPartSize = 16 << 20

// S3Config says where an S3 store is and how to reach it.
type S3Config struct {
	Endpoint string // host[:port], no scheme: TLS is Secure
	Bucket   string
	Region   string // empty: asked of the server
	Secure   bool   // HTTPS
	// RootCAs verify the server's certificate when Secure; nil: the
	// system's roots.
	RootCAs *x509.CertPool
	// AccessKey and SecretKey sign every request (AWS signature v4). The
	// caller reads them from Vault or a protected file.
	AccessKey string
	SecretKey string
	// PartSize of multipart uploads; 0: DefaultPartSize (S3's smallest is
	// 5 MiB).
	PartSize uint64
}

// S3 is a Store in a bucket of an S3-compatible object storage.
type S3 struct {
	client   *minio.Client
	bucket   string
	partSize uint64
}

var _ Store = (*S3)(nil)

// NewS3 returns the store; it does not contact the server (Check does).
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" || strings.Contains(cfg.Endpoint, "/") {
		return nil, fmt.Errorf("s3 endpoint %q: want host[:port], with Secure for TLS", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("s3: no access key or secret")
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	if cfg.Secure {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs}
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.Secure,
		Region:    cfg.Region,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	return &S3{client: client, bucket: cfg.Bucket, partSize: partSize}, nil
}

// Check asks whether the bucket exists, which also proves the credentials.
func (s *S3) Check(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s3Error("check bucket", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("bucket %s: %w", s.bucket, ErrNotFound)
	}
	return nil
}

// Put uploads r in parts of the configured size, holding one part in
// memory. The object appears only when the upload completes; a failed one
// is aborted.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, s.bucket, key, ctxReader{ctx, r}, -1, minio.PutObjectOptions{
		PartSize:    s.partSize,
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return s3Error("put", key, err)
	}
	return nil
}

// Get opens the object, asking for it at once so that a missing object or
// a refusal is reported here and not at the first Read.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		return nil, s3Error("get", key, err)
	}
	return obj, nil
}

// List lists the bucket under prefix. Keys that ValidKey refuses (put
// there by something else) are left out, as Dir leaves out what is not an
// object.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister on an early return
	var objs []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s3Error("list", fmt.Sprintf("%q", prefix), o.Err)
		}
		if ValidKey(o.Key) != nil {
			continue
		}
		objs = append(objs, Object{Key: o.Key, Size: o.Size, Modified: o.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Delete removes the object; S3 answers a delete of a missing key with
// success.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s3Error("delete", key, err)
	}
	return nil
}

// s3Error classifies the server's refusals by their S3 error code (a
// 403 without a known code is a refusal too).
func s3Error(op, key string, err error) error {
	var class error
	switch resp := minio.ToErrorResponse(err); {
	case resp.Code == minio.NoSuchKey || resp.Code == minio.NoSuchBucket:
		class = ErrNotFound
	case resp.Code == minio.AccessDenied || resp.Code == minio.InvalidAccessKeyID ||
		resp.Code == minio.SignatureDoesNotMatch || resp.StatusCode == http.StatusForbidden:
		class = ErrDenied
	default:
		return fmt.Errorf("s3 %s %s: %w", op, key, err)
	}
	return fmt.Errorf("s3 %s %s: %w: %w", op, key, class, err)
}
