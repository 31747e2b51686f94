package sealstream

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/internal/codec"
)

// keyFile loads a key file holding one key per id given, each random.
func keyFile(t testing.TB, ids ...string) *codec.Codec {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		text.WriteString(id + " " + base64.StdEncoding.EncodeToString(key) + "\n")
	}
	path := filepath.Join(t.TempDir(), "codec.key")
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := codec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// marker is plaintext that must not appear in a sealed stream.
var marker = []byte("KEDGE-PLAINTEXT-MARKER/registry/secrets/")

// plaintext is n bytes of the marker over and over.
func plaintext(n int) []byte {
	return bytes.Repeat(marker, n/len(marker)+1)[:n]
}

func seal(t testing.TB, keys Keys, chunk int, plain []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriterSize(&out, keys, chunk)
	if err != nil {
		t.Fatal(err)
	}
	// Odd-sized writes: chunks must not follow the writes.
	for rest := plain; len(rest) > 0; {
		n := min(len(rest), 1000)
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func open(keys Keys, sealed []byte) ([]byte, error) {
	r, err := NewReader(bytes.NewReader(sealed), keys)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

const testChunk = 4096

// Every size around a chunk's opens to the bytes sealed, and none of
// the plaintext's pattern is in the sealed stream.
func TestRoundTripOfEverySizeAroundAChunk(t *testing.T) {
	keys := keyFile(t, "k1")
	for _, chunk := range []int{testChunk, DefaultChunkSize} {
		for _, n := range []int{0, 1, chunk - 1, chunk, chunk + 1, 5*chunk + 7} {
			plain := plaintext(n)
			sealed := seal(t, keys, chunk, plain)
			chunks := max(1, (n+chunk-1)/chunk)
			if want := len(Magic) + 4 + prefixSize + 1 + len("k1") + n + chunks*tagSize; len(sealed) != want {
				t.Errorf("chunk %d, %d bytes: sealed to %d bytes, want %d", chunk, n, len(sealed), want)
			}
			if n >= len(marker) && bytes.Contains(sealed, marker) {
				t.Errorf("chunk %d, %d bytes: the plaintext's marker is in the sealed stream", chunk, n)
			}
			got, err := open(keys, sealed)
			if err != nil {
				t.Fatalf("chunk %d, %d bytes: %v", chunk, n, err)
			}
			if sha256.Sum256(got) != sha256.Sum256(plain) {
				t.Errorf("chunk %d, %d bytes: opened to %d other bytes", chunk, n, len(got))
			}
		}
	}
}

// Two streams of the same plaintext under the same key differ (a random
// nonce prefix each).
func TestEachStreamHasItsOwnNonces(t *testing.T) {
	keys := keyFile(t, "k1")
	plain := plaintext(3 * testChunk)
	a, b := seal(t, keys, testChunk, plain), seal(t, keys, testChunk, plain)
	h := fixedHeader + len("k1")
	if bytes.Equal(a[h:h+64], b[h:h+64]) {
		t.Error("the same plaintext sealed twice gave the same ciphertext")
	}
}

// Every way a stream can be changed is refused, each with its error.
func TestTamperingIsRefused(t *testing.T) {
	keys := keyFile(t, "k1")
	const n = 3*testChunk + 100
	good := seal(t, keys, testChunk, plaintext(n))
	h := fixedHeader + len("k1")
	sealedChunk := testChunk + tagSize
	chunkAt := func(i int) (int, int) { return h + i*sealedChunk, min(len(good), h+(i+1)*sealedChunk) }
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	flip := func(at int) []byte { return edit(func(b []byte) []byte { b[at] ^= 0x01; return b }) }
	for _, c := range []struct {
		name   string
		sealed []byte
		want   error
		says   string
	}{
		{"the magic", flip(0), ErrNotSealed, "does not start with KEDGESEAL1"},
		{"the chunk size", flip(len(Magic) + 3), ErrTampered, "chunk 0"},
		{"the chunk size, out of range", flip(len(Magic)), ErrTampered, "chunk size"},
		{"the nonce prefix", flip(len(Magic) + 4), ErrTampered, "chunk 0"},
		{"the key id", flip(h - 1), ErrUnknownKey, `"k0"`},
		{"a byte of the first chunk", flip(h + 10), ErrTampered, "chunk 0"},
		{"a byte of the second chunk's tag", flip(h + 2*sealedChunk - 1), ErrTampered, "chunk 1"},
		{"a byte of the last chunk", flip(len(good) - 20), ErrTampered, "chunk 3"},
		{"cut at a chunk boundary", good[:h+3*sealedChunk], ErrTruncated, "ends after chunk 2, which is not the last"},
		{"cut inside a chunk", good[:h+2*sealedChunk+100], ErrTampered, "chunk 2"},
		{"cut inside a tag", good[:h+3*sealedChunk+5], ErrTruncated, "chunk 3 is cut short"},
		{"cut after the header", good[:h], ErrTruncated, "ends before chunk 0"},
		{"cut inside the header", good[:h-1], ErrTruncated, "header is cut short"},
		{"empty", nil, ErrNotSealed, "shorter than a header"},
		{"chunks swapped", edit(func(b []byte) []byte {
			s0, e0 := chunkAt(0)
			s1, e1 := chunkAt(1)
			first := bytes.Clone(b[s0:e0])
			copy(b[s0:e0], b[s1:e1])
			copy(b[s1:e1], first)
			return b
		}), ErrTampered, "chunk 0"},
		{"a chunk dropped", edit(func(b []byte) []byte {
			s, e := chunkAt(1)
			return append(b[:s], b[e:]...)
		}), ErrTampered, "chunk 1"},
		{"a chunk repeated", edit(func(b []byte) []byte {
			s, e := chunkAt(1)
			return append(b[:e], append(bytes.Clone(b[s:e]), b[e:]...)...)
		}), ErrTampered, "chunk 2"},
		{"data appended", append(bytes.Clone(good), 0), ErrTampered, "chunk 3"},
		{"a whole chunk appended after a full last chunk", func() []byte {
			full := seal(t, keys, testChunk, plaintext(2*testChunk))
			return append(full, full[h:h+sealedChunk]...)
		}(), ErrTrailingData, "chunk 1 is the last one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := open(keys, c.sealed)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("got %v (%d bytes read), want %v saying %q", err, len(got), c.want, c.says)
			}
		})
	}
}

// A stream opens only with the key that sealed it: another key file
// without its id refuses it at the header, one with another key under
// the same id at the first chunk.
func TestOnlyTheSealingKeyOpens(t *testing.T) {
	keys := keyFile(t, "k1", "k2")
	sealed := seal(t, keys, testChunk, plaintext(2*testChunk))
	if r, err := NewReader(bytes.NewReader(sealed), keyFile(t, "k2")); !errors.Is(err, ErrUnknownKey) ||
		!errors.Is(err, codec.ErrUnknownKey) || !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("a key file without k1: %v", err)
	} else if r != nil {
		t.Error("a reader without its key")
	}
	r, err := NewReader(bytes.NewReader(sealed), keyFile(t, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); !errors.Is(err, ErrTampered) || len(got) != 0 || !strings.Contains(err.Error(), `another key named "k1"`) {
		t.Errorf("another key named k1: %d bytes, %v", len(got), err)
	}
	if r.KeyID() != "k1" || r.ChunkSize() != testChunk {
		t.Errorf("header: key %q, chunk %d", r.KeyID(), r.ChunkSize())
	}
}

// Chunks go out whole as they fill; writing after Close is refused.
func TestWriterWritesWholeChunks(t *testing.T) {
	keys := keyFile(t, "k1")
	var out bytes.Buffer
	w, err := NewWriterSize(&out, keys, testChunk)
	if err != nil {
		t.Fatal(err)
	}
	h := out.Len()
	_, _ = w.Write(plaintext(testChunk))
	if out.Len() != h {
		t.Errorf("a full chunk went out before more followed (%d bytes)", out.Len()-h)
	}
	_, _ = w.Write([]byte{1})
	if out.Len() != h+testChunk+tagSize {
		t.Errorf("after chunk+1 bytes, %d bytes out", out.Len()-h)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := w.Write([]byte{1}); err == nil {
		t.Error("a write after Close")
	}
	if _, err := NewWriterSize(&out, keys, MaxChunkSize+1); err == nil {
		t.Error("a chunk size over the maximum")
	}
}

func BenchmarkSeal(b *testing.B) {
	keys := keyFile(b, "k1")
	buf := plaintext(1 << 20)
	const total = 64 << 20
	b.SetBytes(total)
	for b.Loop() {
		w, err := NewWriter(io.Discard, keys)
		if err != nil {
			b.Fatal(err)
		}
		for range total / len(buf) {
			_, _ = w.Write(buf)
		}
		_ = w.Close()
	}
}

func BenchmarkOpen(b *testing.B) {
	keys := keyFile(b, "k1")
	sealed := seal(b, keys, DefaultChunkSize, plaintext(64<<20))
	b.SetBytes(64 << 20)
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(sealed), keys)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
