//go:build tools

// Package etcdctl pins etcdctl at the version of the test world's etcd:
// `make bench` takes a snapshot with it (`etcdctl snapshot save`), the
// baseline of Kedge's etcd.snapshot.
package etcdctl

import _ "go.etcd.io/etcd/etcdctl/v3"
