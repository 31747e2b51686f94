package etcdapi

import (
	"io"
	"sync"
)

// pipe is io.Pipe with room for a few buffers: Write copies into a free
// buffer and returns, so the pull (gRPC, TLS, hashes, sealing) goes on
// while the store writes or uploads what came before, on another core.
// io.Pipe hands each write over whole, so the two sides took turns.
// At most pipeBuffers × pipeBufferSize bytes wait in it.
type pipe struct {
	full chan []byte   // written, not yet read; closed by closeWrite
	free chan []byte   // buffers to write into
	done chan struct{} // closed by closeRead: the reader is gone

	once       sync.Once
	werr, rerr error // set before full, done are closed
	cur, buf   []byte
}

const (
	pipeBuffers    = 4
	pipeBufferSize = 1 << 20 // a sealed chunk (sealstream.DefaultChunkSize)
)

func newPipe() *pipe {
	p := &pipe{full: make(chan []byte, pipeBuffers), free: make(chan []byte, pipeBuffers), done: make(chan struct{})}
	for range pipeBuffers {
		p.free <- make([]byte, pipeBufferSize)
	}
	return p
}

// Write copies b into free buffers; it blocks while every buffer waits
// to be read, and fails once the reader is gone.
func (p *pipe) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.done:
			return n, p.rerr
		}
		c := copy(buf[:cap(buf)], b[n:])
		n += c
		p.full <- buf[:c] // never blocks: a buffer taken from free has room in full
	}
	return n, nil
}

// closeWrite ends the stream: the reader reads what is left, then err
// (io.EOF when nil). It must be called once, after the last Write.
func (p *pipe) closeWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.werr = err
	close(p.full)
}

// Read reads what was written, in order.
func (p *pipe) Read(b []byte) (int, error) {
	if len(p.cur) == 0 {
		if p.buf != nil {
			p.free <- p.buf[:cap(p.buf)] // never blocks: it came from free
			p.buf = nil
		}
		buf, ok := <-p.full
		if !ok {
			return 0, p.werr
		}
		p.buf, p.cur = buf, buf
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// closeRead says the reader reads no more: a Write waiting for room, and
// every later one, fails with err.
func (p *pipe) closeRead(err error) {
	p.once.Do(func() {
		p.rerr = err
		close(p.done)
	})
}
