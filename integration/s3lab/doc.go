// Package s3lab starts a real S3-compatible object store on loopback for
// Kedge's tests: SeaweedFS's `weed server -s3` (master, volume server,
// filer and S3 gateway in one process), built from the Go module proxy by
// scripts/s3-tools.sh.
//
// Each server gets its own temporary data directory and free loopback
// ports, signs requests with a random access key and secret (an S3
// identities file), and has one empty bucket created before Start returns.
// Two identities are configured: the lab's administrator, which creates the
// bucket, and Kedge's, which may only read, write and list that bucket.
// Start also waits until a write succeeds, into a probe bucket of its own
// so that nothing of the probe ever shows in Kedge's bucket.
//
// With Options.TLS the S3 endpoint serves HTTPS only (weed's
// -s3.cert.file and -s3.key.file, no -s3.port.https), with a certificate
// for 127.0.0.1 signed by a CA made for that server alone (Server.CAFile,
// Server.RootCAs). NewAuthority makes other throwaway CAs, e.g. a man in
// the middle's.
//
// Stop (registered as a test Cleanup by StartT) kills the server's process
// group and removes its directory, also when the test failed.
//
// It is test infrastructure; it must never hold anything that matters.
package s3lab
