// Command testreport runs `go test -json` and ends with where the time
// went (see package testreport), or shows the last run's report again.
//
//	testreport run [--budget F] [--dir D] [--top N] [--output text|json] -- go test -json ./...
//	testreport show [--dir D] [--output text|json]
package main

import (
	"os"

	"kedge.dev/kedge/internal/testreport"
)

func main() {
	os.Exit(testreport.Main(os.Args[1:], os.Stdout, os.Stderr))
}
