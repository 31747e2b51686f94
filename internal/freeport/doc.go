// Package freeport picks TCP ports for servers that Kedge starts and that
// bind their own listeners later: the embedded Temporal server's services,
// the throwaway etcd of a restore drill, the test worlds' labs.
//
// A port from bind(":0") is in the kernel's ephemeral range, the range every
// outgoing connection takes its local port from. Between the moment such a
// port is released and the moment the server binds it, a busy machine can
// hand it to a new connection, and the server fails to start (Temporal's
// exits the process). Ports are therefore picked below the ephemeral range,
// where only an explicit bind can take them.
package freeport
