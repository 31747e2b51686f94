package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Store keeps named objects. Every method checks its key (or prefix) with
// ValidKey before it touches anything.
type Store interface {
	// Put stores what r yields under key, replacing an object of that
	// name only once the whole of it is stored: a failed or cancelled Put
	// leaves the old object (or none), never a part.
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the object; ErrNotFound when there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns the objects whose keys start with prefix ("" for all),
	// sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes the object; deleting one that is not there succeeds,
	// so a retried Delete does too.
	Delete(ctx context.Context, key string) error
}

// Object is one stored object as List reports it.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

var (
	// ErrInvalidKey: the key or prefix is not one ValidKey accepts.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrNotFound: no object has the key.
	ErrNotFound = errors.New("object not found")
	// ErrDenied: the store refused the credentials or the access.
	ErrDenied = errors.New("object store refused access")
)

// MaxKeyLen is the longest key accepted, in bytes (S3's limit is 1024).
const MaxKeyLen = 512

// ValidKey reports whether key is a relative, slash-separated name whose
// segments are made of ASCII letters, digits, '.', '_' and '-' and start
// with a letter or digit. That refuses "", absolute paths, "." and ".."
// segments, empty segments ("a//b", a trailing "/"), hidden names and
// anything outside the charset (backslashes, spaces, control characters,
// non-ASCII).
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for _, seg := range strings.Split(key, "/") {
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, err)
		}
	}
	return nil
}

// validPrefix accepts "" (everything), a valid key, or a valid key
// followed by "/" (a "directory").
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidKey(strings.TrimSuffix(prefix, "/"))
}

type segmentError string

func (e segmentError) Error() string { return string(e) }

func validSegment(seg string) error {
	if seg == "" {
		return segmentError("empty segment")
	}
	if !isAlnum(seg[0]) {
		return segmentError("a segment starts with a letter or digit")
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return segmentError(fmt.Sprintf("character %q", c))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
