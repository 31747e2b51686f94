package sshpool

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"testing"

	"github.com/pkg/sftp"
)

// An SFTP server that announces limits@openssh.com (OpenSSH's) is
// written to in pieces of its read and write length; any other in the
// 32 KiB every server takes.
func TestSFTPWritesInOpenSSHsPiecesOnlyWhenItSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name string
		exts []string
		want int
	}{
		{"openssh", []string{"posix-rename@openssh.com", limitsExtension}, openSSHPacket},
		{"another server", []string{"posix-rename@openssh.com"}, 32 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr, sw := io.Pipe()
			sr, cw := io.Pipe()
			writes := make(chan int, 64)
			go fakeSFTPServer(sr, sw, tc.exts, writes)
			cl, err := sftp.NewClientPipe(cr, cw, sftp.UseConcurrentWrites(true))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			f, err := sizePackets(cl).OpenFile("/f", os.O_WRONLY|os.O_CREATE)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(make([]byte, 1<<20)); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			largest, total := 0, 0
			for len(writes) > 0 {
				n := <-writes
				largest, total = max(largest, n), total+n
			}
			if largest != tc.want || total != 1<<20 {
				t.Errorf("1 MiB written in pieces of up to %d bytes, %d in all; want pieces of %d", largest, total, tc.want)
			}
		})
	}
}

// fakeSFTPServer answers an SFTP version 3 client on r and w: VERSION
// with exts, a handle for OPEN, success for anything else; it sends the
// length of each WRITE's data to writes.
func fakeSFTPServer(r io.Reader, w io.WriteCloser, exts []string, writes chan<- int) {
	defer w.Close()
	send := func(typ byte, body []byte) bool {
		hdr := binary.BigEndian.AppendUint32(nil, uint32(1+len(body)))
		_, err := w.Write(append(append(hdr, typ), body...))
		return err == nil
	}
	str := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...) }
	for {
		var n uint32
		if binary.Read(r, binary.BigEndian, &n) != nil {
			return
		}
		pkt := make([]byte, n)
		if _, err := io.ReadFull(r, pkt); err != nil {
			return
		}
		typ, body := pkt[0], pkt[1:]
		if typ == 1 { // INIT
			version := binary.BigEndian.AppendUint32(nil, 3)
			for _, e := range exts {
				version = str(str(version, e), "1")
			}
			if !send(2, version) {
				return
			}
			continue
		}
		id := body[:4]
		switch typ {
		case 3: // OPEN
			if !send(102, str(bytes.Clone(id), "h")) {
				return
			}
			continue
		case 6: // WRITE: id, handle, offset, data
			handle := binary.BigEndian.Uint32(body[4:])
			data := body[4+4+handle+8:]
			writes <- int(binary.BigEndian.Uint32(data))
		}
		if !send(101, str(str(binary.BigEndian.AppendUint32(bytes.Clone(id), 0), ""), "")) { // STATUS OK
			return
		}
	}
}
