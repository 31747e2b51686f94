// Package watchdog names the tests still running shortly before a test
// binary's -timeout would end it. Go's own timeout panic names them too,
// but at the head of a goroutine dump thousands of lines long, where a CI
// log's tail never reaches; the watchdog prints the names and the stacks
// of those tests alone, tears the package's world down and exits, so the
// last lines of the log say which test hung and where. An interrupted
// binary (SIGINT, SIGTERM) does the same: a Ctrl-C never leaves the
// world's servers, namespaces and cgroups running.
package watchdog
