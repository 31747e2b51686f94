// Command snapbench is the worker side of `make bench`'s etcd snapshot
// row: in a process of its own, so that its peak resident memory is the
// snapshot's, it runs etcd.snapshot's implementation (the worker's code,
// outside Temporal) once: a snapshot from the etcd at -endpoint, sealed
// with the codec key and stored at the destination -dest (the S3 server
// the bench runs, or a local directory). It prints the result and the
// process's peak RSS (VmHWM) as one JSON object; with -cpuprofile, it
// writes the snapshot's CPU profile to that file.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/actions/vault"
	"kedge.dev/kedge/activities/etcdapi"
	"kedge.dev/kedge/internal/codec"
)

func main() {
	endpoint := flag.String("endpoint", "", "etcd client URL (https)")
	caFile := flag.String("ca", "", "etcd's CA (PEM)")
	certFile := flag.String("cert", "", "client certificate (PEM) from etcd's CA")
	keyFile := flag.String("key", "", "its key (PEM)")
	codecKey := flag.String("codec-key", "", "the codec key file")
	dest := flag.String("dest", "", "the destination as JSON (actions/etcd.Destination)")
	cpuProfile := flag.String("cpuprofile", "", "write the snapshot's CPU profile to this file")
	flag.Parse()
	if err := run(*endpoint, *caFile, *certFile, *keyFile, *codecKey, *dest, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "snapbench:", err)
		os.Exit(1)
	}
}

// issuer hands out the client certificate made for the bench (the
// worker's Vault is not what is measured).
type issuer struct{ cert, key string }

func (i issuer) IssueCert(context.Context, vault.IssueCertInput) (vault.IssueCertResult, error) {
	return vault.IssueCertResult{Certificate: i.cert, PrivateKey: i.key}, nil
}

// destinations is the one destination, "bench".
type destinations struct{ d etcd.Destination }

func (d destinations) Destination(_, name string) (etcd.Destination, error) {
	if name != "bench" {
		return etcd.Destination{}, fmt.Errorf("no destination %q", name)
	}
	return d.d, nil
}

func run(endpoint, caFile, certFile, keyFile, codecKey, dest, cpuProfile string) error {
	read := func(p string) (string, error) { b, err := os.ReadFile(p); return string(b), err }
	ca, err := read(caFile)
	if err != nil {
		return err
	}
	cert, err := read(certFile)
	if err != nil {
		return err
	}
	key, err := read(keyFile)
	if err != nil {
		return err
	}
	keys, err := codec.Load(codecKey)
	if err != nil {
		return err
	}
	var d etcd.Destination
	if err := json.Unmarshal([]byte(dest), &d); err != nil {
		return fmt.Errorf("-dest: %w", err)
	}
	a := &etcdapi.Activities{Vault: issuer{cert, key}, Keys: keys, Destinations: destinations{d}, Timeout: 30 * time.Second}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	res, err := a.Snapshot(context.Background(), etcd.SnapshotInput{Vault: target.Vault{Cluster: "bench"}, Endpoints: []string{endpoint},
		CACert: ca, Issuer: "etcd", Destination: "bench"})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"result": res, "seconds": time.Since(began).Seconds(), "peakRSSKiB": peakRSS()})
}

// peakRSS is the process's peak resident set, in KiB (VmHWM).
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err == nil {
				return kib
			}
		}
	}
	return -1
}
