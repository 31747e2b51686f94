#!/usr/bin/env bash
# Builds the test world's Kubernetes binaries (etcd and its etcdctl,
# Typhoon's etcd v3.5.13 and the 3.5 patch etcd-upgrade takes it to,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kubelet, kube-proxy) from the Go module proxy into a cache directory
# keyed by the pinned versions, once per machine. Prints the directory. With `next`, the next minor's
# control plane, kubelet and kube-proxy instead (the version clusters are upgraded
# to): only the commands the upgrade tests run, no etcd. Cold: many minutes on 2 cores (the
# kubelet alone about 17); cached: instant. Safe to run concurrently: one
# build at a time (flock), each binary renamed into place when whole.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_version=v1.35.4
etcd_version=v3.6.16
# Typhoon's controllers run etcd from quay.io/coreos/etcd:v3.5.13: its
# test world runs that version (integration/tools/etcd35).
typhoon_etcd=etcd-v3.5.13
# etcd-upgrade's test takes Typhoon's etcd to this 3.5 patch (3.6 asks
# for a late one first), then to $etcd_version
# (integration/tools/etcd35patch).
patch_etcd=etcd-v3.5.36
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
module=integration/tools/kube
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/kube-$kube_version-etcd-$etcd_version"
etcds=yes
if [ "${1:-}" = next ]; then
  kube_version=v1.36.3
  cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
  module=integration/tools/kube136
  out="$cache/kube-$kube_version"
  etcds=
fi

complete() {
  if [ -n "$etcds" ]; then
    [ -x "$out/etcd" ] || return 1
    [ -x "$out/etcdctl" ] || return 1
    [ -x "$out/$typhoon_etcd" ] || return 1
    [ -x "$out/$patch_etcd" ] || return 1
  fi
  for cmd in "${cmds[@]}"; do [ -x "$out/$cmd" ] || return 1; done
}
if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
step() { printf '%s kube-tools: %s\n' "$(date +%T)" "$*" >&2; }

# One build directory per run; each binary is renamed into place whole.
tmp="$out/.build.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# etcd (its own module) builds beside the Kubernetes commands, and those
# build in one `go build`: one command's link overlaps another's compile,
# and 2 cores stay busy.
etcd_pid=
if [ -n "$etcds" ] && [ ! -x "$out/etcd" ]; then
  step "building etcd $etcd_version"
  (cd integration/tools/etcd && go build -o "$tmp/etcd" go.etcd.io/etcd/server/v3) &
  etcd_pid=$!
fi
# etcdctl (make bench's baseline for etcd.snapshot), from its own module
# at the same version: a cache made before it is completed by this step
# alone (seconds when etcd's packages are in Go's build cache).
etcdctl_pid=
if [ -n "$etcds" ] && [ ! -x "$out/etcdctl" ]; then
  step "building etcdctl $etcd_version"
  (cd integration/tools/etcdctl && go build -o "$tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3) &
  etcdctl_pid=$!
fi
typhoon_pid=
if [ -n "$etcds" ] && [ ! -x "$out/$typhoon_etcd" ]; then
  step "building $typhoon_etcd (Typhoon's)"
  (cd integration/tools/etcd35 && go build -o "$tmp/$typhoon_etcd" go.etcd.io/etcd/server/v3) &
  typhoon_pid=$!
fi
patch_pid=
if [ -n "$etcds" ] && [ ! -x "$out/$patch_etcd" ]; then
  step "building $patch_etcd"
  (cd integration/tools/etcd35patch && go build -o "$tmp/$patch_etcd" go.etcd.io/etcd/server/v3) &
  patch_pid=$!
fi
missing=()
for cmd in "${cmds[@]}"; do
  [ -x "$out/$cmd" ] || missing+=("$cmd")
done
if [ "${#missing[@]}" -gt 0 ]; then
  step "building ${missing[*]} $kube_version (many minutes on a cold cache)"
  (cd "$module" && go build -ldflags "$ldflags" -o "$tmp/" "${missing[@]/#/k8s.io/kubernetes/cmd/}")
fi
if [ -n "$etcd_pid" ]; then
  wait "$etcd_pid"
fi
if [ -n "$etcdctl_pid" ]; then
  wait "$etcdctl_pid"
fi
if [ -n "$typhoon_pid" ]; then
  wait "$typhoon_pid"
fi
if [ -n "$patch_pid" ]; then
  wait "$patch_pid"
fi
for bin in "$tmp"/*; do
  if [ -e "$bin" ]; then mv "$bin" "$out/"; fi
done
step "done"
echo "$out"
