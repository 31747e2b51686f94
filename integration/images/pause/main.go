// Command pause is the test world's pod sandbox image
// (registry.k8s.io/pause): it holds a pod's namespaces open until it is
// told to stop, and as the pod's first process it reaps the children the
// pod's containers leave to it. Built static (CGO_ENABLED=0) by
// integration/images, which puts it alone in an image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	child := make(chan os.Signal, 1)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-child:
			reap()
		}
	}
}

// reap waits for every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
