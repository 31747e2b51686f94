// Command badflag stands in an image for a component that cannot start:
// it runs the binary beside it named as itself with ".real" added, with
// its arguments and one flag no Kubernetes component knows, so the real
// program refuses to start the way a manifest with a bad flag makes it.
package main

import (
	"fmt"
	"os"
	"syscall"
)

// Flag is the flag added.
const Flag = "--kedge-injected-bad-flag=true"

func main() {
	self, err := os.Executable()
	if err == nil {
		target := self + ".real"
		err = syscall.Exec(target, append(append([]string{target}, os.Args[1:]...), Flag), os.Environ())
	}
	fmt.Fprintln(os.Stderr, "badflag:", err)
	os.Exit(1)
}
