// Package codec encrypts every payload Kedge puts into Temporal: workflow
// and activity inputs and results, query answers, and (through the failure
// converter) error messages and stack traces. Runbook params may hold
// secrets and activities may return issued keys: with the codec, Temporal
// stores only AES-256-GCM ciphertext, tagged with the id of the key that
// sealed it so keys can be rotated.
//
// Keys live in a key file: one key per line, "ID BASE64(32 bytes)"; the
// first line seals, every line opens. `kedge codec keygen` writes one;
// `kedge dev` creates one beside its state. The worker and the CLI load
// the same file; `kedge codec-server` serves the Temporal Web UI's remote
// codec protocol so operators see decoded payloads in the browser.
package codec
