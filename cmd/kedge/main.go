// Command kedge runs Kubernetes cluster runbooks durably on Temporal. See
// `kedge --help` and the README.
package main

import (
	"os"

	"kedge.dev/kedge/starter"
)

func main() {
	os.Exit(starter.Main(os.Args, starter.StdIO()))
}
