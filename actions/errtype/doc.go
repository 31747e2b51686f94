// Package errtype names every error type Kedge's actions and workflows
// fail with: the type of the Temporal application error, which the
// workflow, `kedge watch`, chat and the runbooks' `retry` read. Each is
// declared once, here; the packages that fail with one use these names.
//
// Whether a type is retried is decided where the error is made (a
// non-retryable application error is never retried); the comments say
// which way each goes.
//
// Of and Is read the type of an error, so a comparison with a type is
// written once (errtype.Is(err, errtype.NodeBusy)), not as errors.As and
// Type() at each place. The package imports nothing but the standard
// library and the SDK's temporal package: everything may import it.
package errtype
