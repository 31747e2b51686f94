// Package testreport reads the event stream of `go test -json` and says
// where a test run's time went: each package's wall time, the slowest
// tests, and which tests ran past the budget the tree allows them
// (integration/budget.txt).
//
// While it reads, it prints what `go test` without -v would have printed:
// each package's closing line (ok, FAIL, no test files), the whole output
// of every failing test, and anything the run printed outside a test, so
// CI reads pass or fail as before. The budgets are wall times measured on
// the project's 2-core machine; a slower machine's own measure (a fixed
// CPU-bound job timed at the start and end of the run) stretches them.
//
// A parallel test that logs its wait for its turn in its lane (LaneWait)
// is timed without it: the time it took itself.
//
// It never decides what a test asserts; it only times tests and refuses
// a run whose slow tests are not accounted for.
package testreport
