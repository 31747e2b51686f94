// Package sealstream seals a large file (an etcd snapshot) with Kedge's
// codec key as it streams, and opens it again, so that what leaves the
// worker is ciphertext and no more than one chunk is ever held in memory.
//
// The format, version 1:
//
//	header  "KEDGESEAL1" | chunk size (uint32, big endian) | nonce prefix (8 random bytes)
//	        | key id length (uint8) | key id
//	chunks  chunk 0 | chunk 1 | ... | chunk n-1
//
// Every chunk is AES-256-GCM ciphertext of exactly the chunk size of
// plaintext, with its 16-byte tag, but the last, which holds what is left
// (0 bytes only for an empty file). Chunk i is sealed under the key the
// header names with the nonce prefix | i (uint32, big endian), and its
// authenticated data is the whole header and one byte, 1 for the last
// chunk and 0 for the others. So a changed header (a key id, a chunk size
// or a prefix swapped), a changed byte of a chunk or of a tag, chunks
// swapped or dropped, a stream cut at a chunk boundary, and anything
// appended after the last chunk all fail to open, each with its own
// error (ErrTampered, ErrTruncated, ErrTrailingData). A stream is at most
// 2^32 chunks (4 PiB at 1 MiB chunks).
//
// A Reader hands out each chunk's plaintext once it has authenticated,
// and io.EOF only once the last chunk has: what a reader read before any
// other error is a prefix of the file, not the file (a restore writes it
// aside and uses it only after io.EOF).
//
// The nonce prefix is random per file: under one key, two files share a
// prefix (and so nonces) with probability about n²/2^65 for n files.
// Rotate the codec key long before that matters.
//
// It must never write plaintext to the underlying writer, never return
// plaintext of a chunk that did not authenticate, and never allocate more
// than one chunk for a header it has not authenticated (MaxChunkSize).
package sealstream
