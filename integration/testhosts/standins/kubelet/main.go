package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if filepath.Base(os.Args[0]) == enterHostArg0 {
		os.Exit(enterHostMain())
	}
	o, err := parseOptions(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet simulator:", err)
		os.Exit(2)
	}
	if o.printVersion {
		fmt.Println("Kubernetes " + o.version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	if err := run(ctx, o, logger); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "kubelet simulator:", err)
		os.Exit(1)
	}
}
