#!/usr/bin/env bash
# Builds the test world's Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) from the Go module proxy
# into a cache directory keyed by the pinned versions, once per machine.
# Prints the directory. Cold: several minutes on 2 cores; cached: instant.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_version=v1.35.4
etcd_version=v3.6.16
cache="${KEDGE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kedge/tools}"
out="$cache/kube-$kube_version-etcd-$etcd_version"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
step() { printf '%s kube-tools: %s\n' "$(date +%T)" "$*" >&2; }

step "building etcd $etcd_version"
(cd integration/tools/etcd && go build -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$out/etcd.tmp" "$out/etcd")
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  step "building $cmd $kube_version (kube-apiserver takes minutes on a cold cache)"
  (cd integration/tools/kube && go build -ldflags "$ldflags" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" && mv "$out/$cmd.tmp" "$out/$cmd")
done
step "done"
echo "$out"
