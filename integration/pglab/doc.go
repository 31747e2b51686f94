// Package pglab runs a real PostgreSQL server (Debian's, installed by
// scripts/deps.sh) for the tests of Kedge's team topology: Temporal on
// PostgreSQL, as the compose install runs it. The server lives in a
// temporary directory, listens on one loopback address and runs as an
// unprivileged user (PostgreSQL refuses root); Stop, Kill and Start let
// tests restart it under a run.
package pglab
