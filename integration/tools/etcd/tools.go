//go:build tools

// Package etcd pins the etcd server the test world runs.
package etcd

import _ "go.etcd.io/etcd/server/v3"
