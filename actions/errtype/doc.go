// Package errtype names every error type Kedge's actions and workflows
// fail with: the type of the Temporal application error, which the
// workflow, `kedge watch`, chat and the runbooks' `retry` read. Each is
// declared once, here; the packages that fail with one use these names.
//
// Whether a type is retried is decided where the error is made (a
// non-retryable application error is never retried); the comments say
// which way each goes.
package errtype
