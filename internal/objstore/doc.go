// Package objstore is where Kedge keeps what it must find again off the
// hosts, etcd snapshots first: a small Store interface (Put, Get, List,
// Delete of named objects) with two implementations, a directory on the
// worker (Dir) and an S3-compatible bucket (S3).
//
// Objects are streamed both ways: Put reads from an io.Reader of unknown
// length and never holds a whole object in memory (the S3 store uploads it
// in parts of a fixed size), and Get hands back a reader.
//
// Keys are checked the same way by both stores before anything is touched
// (ValidKey): relative, slash-separated segments of letters, digits, '.',
// '_' and '-', each starting with a letter or digit, so no key can name a
// parent directory, an absolute path or a hidden (temporary) file.
//
// The package never reads credentials itself: the caller reads the access
// key and secret from Vault or a protected file (internal/secretfile) and
// passes them in. It must never log or return a secret in an error, and it
// knows nothing of what the objects hold: sealing a snapshot is the
// caller's job, before Put.
package objstore
