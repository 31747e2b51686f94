// Package fleetlockclient is a FleetLock client for Kedge's test world:
// it stands in for Zincati on test nodes, so that tests can drive a
// node's update cycle against Kedge's FleetLock server (package
// fleetlock) step by step. It is written from the protocol's text, not
// from the server's code, and shares nothing with it: where the two
// disagree on the wire, a test fails.
//
// It sends what Zincati sends: a POST to the base URL resolved with
// v1/pre-reboot or v1/steady-state (as a relative reference, so a base URL
// without its trailing slash loses its last segment, as Zincati's does),
// the header fleet-lock-protocol: true, and the body
// {"client_params": {"id": ID, "group": GROUP}}, indented as Zincati
// indents it, with no Content-Type. It reads an answer as the protocol
// says: 200 is success, anything else a failure, whose JSON
// {"kind", "value"} it returns as a *Rejection (generic_http_STATUS when
// the body is not one). It is stricter than Zincati in one thing: Zincati
// takes any 2xx as success, this client only 200, the protocol's word.
//
// It keeps the protocol's client state machine and refuses a step out of
// its order (ErrOutOfOrder) without sending anything:
//
//	initialization --SteadyState--> steady --UpdateStaged--> pre-reboot
//	pre-reboot --PreReboot granted--> finalization --Reboot--> initialization
//
// A failed step leaves the state as it was; LockUntilGranted and
// UnlockUntilAcknowledged repeat one at a fixed interval, as Zincati
// repeats its requests at a fixed refresh period (five minutes, with
// jitter) until one succeeds.
//
// It is test infrastructure: it must never act for a real node, whose
// own Zincati asks for its reboots.
package fleetlockclient
