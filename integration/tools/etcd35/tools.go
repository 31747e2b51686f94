//go:build tools

// Package etcd35 pins the etcd server Typhoon's test world runs: the
// version of Typhoon's own etcd image (quay.io/coreos/etcd:v3.5.13).
package etcd35

import _ "go.etcd.io/etcd/server/v3"
