package sealstream

import (
	"bufio"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Magic opens every sealed stream; its last character is the version.
const Magic = "KEDGESEAL1"

// Chunk sizes.
const (
	DefaultChunkSize = 1 << 20
	MinChunkSize     = 64
	// MaxChunkSize bounds what a Reader allocates for a header it has not
	// yet authenticated.
	MaxChunkSize = 16 << 20
)

const (
	prefixSize = 8
	nonceSize  = 12
	tagSize    = 16
	maxKeyID   = math.MaxUint8
	// fixedHeader is the header without its key id.
	fixedHeader = len(Magic) + 4 + prefixSize + 1
)

// Keys are the codec keys: the one that seals and every one that opens
// (*codec.Codec).
type Keys interface {
	// ActiveKey is the id of the key that seals.
	ActiveKey() string
	// AEAD is the AES-256-GCM of the key with that id.
	AEAD(id string) (cipher.AEAD, error)
}

// Why a stream does not open.
var (
	// ErrNotSealed: the stream does not start with a version 1 header.
	ErrNotSealed = errors.New("not a Kedge sealed stream")
	// ErrUnknownKey: the header names a key the key file does not hold.
	ErrUnknownKey = errors.New("sealed with a key not in the key file")
	// ErrTampered: a chunk does not authenticate: its bytes, its place or
	// the header were changed, or a different key has the id the header
	// names.
	ErrTampered = errors.New("sealed stream does not authenticate")
	// ErrTruncated: the stream ends before its last chunk.
	ErrTruncated = errors.New("sealed stream is truncated")
	// ErrTrailingData: bytes follow the last chunk.
	ErrTrailingData = errors.New("sealed stream has data after its last chunk")
)

// Writer seals what is written to it onto an underlying writer, one
// chunk at a time. Close seals the last chunk; without it the stream is
// truncated and will not open.
type Writer struct {
	w       io.Writer
	aead    cipher.AEAD
	ad      []byte // the header and the last-chunk flag
	nonce   [nonceSize]byte
	buf     []byte // the pending plaintext; room for its tag
	chunk   int
	counter uint64
	err     error
}

// NewWriter writes the header of a stream sealed with the active key to
// w, in chunks of DefaultChunkSize.
func NewWriter(w io.Writer, keys Keys) (*Writer, error) {
	return NewWriterSize(w, keys, DefaultChunkSize)
}

// NewWriterSize is NewWriter with chunks of chunkSize bytes.
func NewWriterSize(w io.Writer, keys Keys, chunkSize int) (*Writer, error) {
	if chunkSize < MinChunkSize || chunkSize > MaxChunkSize {
		return nil, fmt.Errorf("sealstream: chunk size %d is not between %d and %d", chunkSize, MinChunkSize, MaxChunkSize)
	}
	id := keys.ActiveKey()
	if id == "" || len(id) > maxKeyID {
		return nil, fmt.Errorf("sealstream: key id %q is empty or over %d bytes", id, maxKeyID)
	}
	aead, err := keys.AEAD(id)
	if err != nil {
		return nil, fmt.Errorf("sealstream: the active key %q: %w", id, err)
	}
	if aead.NonceSize() != nonceSize || aead.Overhead() != tagSize {
		return nil, fmt.Errorf("sealstream: key %q is not AES-GCM with %d-byte nonces and %d-byte tags", id, nonceSize, tagSize)
	}
	header := make([]byte, fixedHeader, fixedHeader+len(id)+1)
	copy(header, Magic)
	binary.BigEndian.PutUint32(header[len(Magic):], uint32(chunkSize))
	prefix := header[len(Magic)+4 : len(Magic)+4+prefixSize]
	if _, err := rand.Read(prefix); err != nil {
		return nil, err
	}
	header[fixedHeader-1] = byte(len(id))
	header = append(header, id...)
	sw := &Writer{w: w, aead: aead, chunk: chunkSize, buf: make([]byte, 0, chunkSize+tagSize)}
	copy(sw.nonce[:], prefix)
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	sw.ad = append(header, 0)
	return sw, nil
}

// Write seals p's bytes as chunks fill. Chunks are written whole.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		// A full chunk is sealed only once more follows: the last chunk
		// may be full.
		if len(w.buf) == w.chunk {
			if err := w.seal(false); err != nil {
				return written, err
			}
		}
		n := copy(w.buf[len(w.buf):w.chunk], p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		written += n
	}
	return written, nil
}

// Close seals the last chunk. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		if errors.Is(w.err, errClosed) {
			return nil
		}
		return w.err
	}
	if err := w.seal(true); err != nil {
		return err
	}
	w.err = errClosed
	return nil
}

var errClosed = errors.New("sealstream: write after Close")

func (w *Writer) seal(last bool) error {
	if w.counter > math.MaxUint32 {
		w.err = fmt.Errorf("sealstream: over %d chunks", uint64(math.MaxUint32)+1)
		return w.err
	}
	binary.BigEndian.PutUint32(w.nonce[prefixSize:], uint32(w.counter))
	w.ad[len(w.ad)-1] = flag(last)
	sealed := w.aead.Seal(w.buf[:0], w.nonce[:], w.buf, w.ad)
	if _, err := w.w.Write(sealed); err != nil {
		w.err = err
		return err
	}
	w.buf = w.buf[:0]
	w.counter++
	return nil
}

func flag(last bool) byte {
	if last {
		return 1
	}
	return 0
}

// Reader opens a sealed stream. It returns a chunk's plaintext only once
// the chunk has authenticated, and io.EOF only after the last chunk did.
type Reader struct {
	r       *bufio.Reader
	aead    cipher.AEAD
	keyID   string
	ad      []byte
	nonce   [nonceSize]byte
	chunk   int
	buf     []byte // one sealed chunk
	out     []byte // its plaintext (apart: a chunk that fails is opened again)
	plain   []byte // authenticated, not yet read
	counter uint64
	err     error // sticky; io.EOF after the last chunk
}

// NewReader reads the header of a sealed stream and finds its key.
func NewReader(r io.Reader, keys Keys) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	fixed := make([]byte, fixedHeader)
	if _, err := io.ReadFull(br, fixed); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: shorter than a header", ErrNotSealed)
		}
		return nil, err
	}
	if string(fixed[:len(Magic)]) != Magic {
		return nil, fmt.Errorf("%w: it does not start with %s", ErrNotSealed, Magic)
	}
	chunk := int(binary.BigEndian.Uint32(fixed[len(Magic):]))
	if chunk < MinChunkSize || chunk > MaxChunkSize {
		return nil, fmt.Errorf("%w: its header's chunk size %d is not between %d and %d", ErrTampered, chunk, MinChunkSize, MaxChunkSize)
	}
	idLen := int(fixed[fixedHeader-1])
	if idLen == 0 {
		return nil, fmt.Errorf("%w: its header names no key", ErrNotSealed)
	}
	header := make([]byte, fixedHeader+idLen, fixedHeader+idLen+1)
	copy(header, fixed)
	if _, err := io.ReadFull(br, header[fixedHeader:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: its header is cut short", ErrTruncated)
		}
		return nil, err
	}
	id := string(header[fixedHeader:])
	aead, err := keys.AEAD(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrUnknownKey, id, err)
	}
	if aead.NonceSize() != nonceSize || aead.Overhead() != tagSize {
		return nil, fmt.Errorf("sealstream: key %q is not AES-GCM with %d-byte nonces and %d-byte tags", id, nonceSize, tagSize)
	}
	sr := &Reader{r: br, aead: aead, keyID: id, chunk: chunk, ad: append(header, 0), buf: make([]byte, chunk+tagSize), out: make([]byte, 0, chunk)}
	copy(sr.nonce[:prefixSize], header[len(Magic)+4:])
	return sr, nil
}

// KeyID is the id of the key the stream is sealed with.
func (r *Reader) KeyID() string { return r.keyID }

// ChunkSize is the stream's chunk size.
func (r *Reader) ChunkSize() int { return r.chunk }

// Read reads authenticated plaintext.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.plain) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	return n, nil
}

// next reads, authenticates and keeps the next chunk: io.EOF once the
// last one is kept, so Read hands out what is left first.
func (r *Reader) next() error {
	n, err := io.ReadFull(r.r, r.buf)
	last := false
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: it ends before chunk %d, after a chunk that is not the last", ErrTruncated, r.counter)
	case errors.Is(err, io.ErrUnexpectedEOF):
		last = true // a short chunk is the last one
	case err != nil:
		return err
	default:
		_, perr := r.r.Peek(1)
		if perr != nil && !errors.Is(perr, io.EOF) {
			return perr
		}
		last = perr != nil // a full chunk is the last one when nothing follows
	}
	if n < tagSize {
		return fmt.Errorf("%w: chunk %d is cut short (%d bytes)", ErrTruncated, r.counter, n)
	}
	if r.counter > math.MaxUint32 {
		return fmt.Errorf("%w: over %d chunks", ErrTampered, uint64(math.MaxUint32)+1)
	}
	binary.BigEndian.PutUint32(r.nonce[prefixSize:], uint32(r.counter))
	ct := r.buf[:n]
	r.ad[len(r.ad)-1] = flag(last)
	plain, oerr := r.aead.Open(r.out[:0], r.nonce[:], ct, r.ad)
	if oerr != nil {
		return r.why(ct, last)
	}
	r.plain = plain
	r.counter++
	if last {
		return io.EOF
	}
	return nil
}

// why says why chunk r.counter, ct, did not open as it stands (last or
// not): it would open in the other place (a stream cut at a chunk
// boundary, or data appended), or it does not open at all.
func (r *Reader) why(ct []byte, last bool) error {
	r.ad[len(r.ad)-1] = flag(!last)
	if _, err := r.aead.Open(r.out[:0], r.nonce[:], ct, r.ad); err == nil {
		if last {
			return fmt.Errorf("%w: it ends after chunk %d, which is not the last", ErrTruncated, r.counter)
		}
		return fmt.Errorf("%w: chunk %d is the last one", ErrTrailingData, r.counter)
	}
	return fmt.Errorf("%w: chunk %d (changed, moved, cut short, or sealed with another key named %q)", ErrTampered, r.counter, r.keyID)
}
