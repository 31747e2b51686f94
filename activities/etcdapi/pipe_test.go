package etcdapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

// TestPipeKeepsOrder writes writes of every size, some larger than the
// pipe's buffers, and reads them back in small reads.
func TestPipeKeepsOrder(t *testing.T) {
	data := make([]byte, 5*pipeBufferSize+12345)
	_, _ = rand.Read(data)
	p := newPipe()
	go func() {
		rest := data
		for _, n := range []int{1, 100, pipeBufferSize - 101, 3 * pipeBufferSize, 7} {
			_, _ = p.Write(rest[:n])
			rest = rest[n:]
		}
		_, _ = p.Write(rest)
		p.closeWrite(nil)
	}()
	got, err := io.ReadAll(io.LimitReader(p, int64(len(data))+1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written in order", len(got), len(data))
	}
}

// TestPipeErrors: the writer's error reaches the reader after the data;
// a reader that stops unblocks a writer waiting for room.
func TestPipeErrors(t *testing.T) {
	p := newPipe()
	boom := errors.New("etcd went away")
	go func() {
		_, _ = p.Write([]byte("abc"))
		p.closeWrite(boom)
	}()
	got, err := io.ReadAll(p)
	if string(got) != "abc" || !errors.Is(err, boom) {
		t.Fatalf("read %q, %v; want abc, %v", got, err, boom)
	}

	p = newPipe()
	stopped := errors.New("the store stopped reading")
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, (pipeBuffers+1)*pipeBufferSize)) // more than fits
		wrote <- err
	}()
	p.closeRead(stopped)
	if err := <-wrote; !errors.Is(err, stopped) {
		t.Fatalf("a write after the reader stopped: %v, want %v", err, stopped)
	}
}

// TestTrailerWhole: one pass gives both etcd's check and the whole
// file's sha256.
func TestTrailerWhole(t *testing.T) {
	body := make([]byte, 100_000)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	file := append(body, sum[:]...)
	tr := &trailer{h: sha256.New()}
	for rest := file; len(rest) > 0; {
		n := min(len(rest), 7_777)
		tr.Write(rest[:n])
		rest = rest[n:]
	}
	if !tr.matches() {
		t.Fatal("etcd's trailing sha256 does not match")
	}
	if want := sha256.Sum256(file); !bytes.Equal(tr.whole(), want[:]) {
		t.Fatal("whole is not the sha256 of the whole file")
	}
}
