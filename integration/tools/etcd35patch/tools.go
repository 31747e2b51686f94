//go:build tools

// Package etcd35patch pins the etcd server a 3.5 cluster is patched to
// before it moves to 3.6 (etcd's 3.6 upgrade guide asks every 3.5 member
// to run a late 3.5 patch first): the test world's etcd-upgrade runs
// Typhoon's v3.5.13 to it, then to v3.6.
package etcd35patch

import _ "go.etcd.io/etcd/server/v3"
