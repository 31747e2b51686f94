#!/usr/bin/env bash
# Installs the system packages Kedge's test world needs, when missing:
# OpenSSH's sshd for the test hosts, pssh as a benchmark baseline, and the
# util-linux tools (unshare, nsenter) that give each host its own files;
# for real kubelets (integration/realnode): containerd and runc, the CNI
# plugins (bridge, host-local, loopback), iptables and iproute2; and
# PostgreSQL for Temporal's team topology.
set -euo pipefail

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v parallel-ssh >/dev/null 2>&1 || need+=(pssh)
# The test hosts' login user becomes root through sudo, as on a real fleet.
[ -x /usr/bin/sudo ] || need+=(sudo)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v flock >/dev/null 2>&1 || need+=(util-linux)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need+=(iptables)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
# Temporal on PostgreSQL, as the team install runs it (integration/pglab).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi

# Every real host has /lib/modules, which the kubelet unit and kube-proxy
# mount; a container image of a machine may not. Made here, once, rather
# than by whichever test first starts a kubelet.
[ -d /lib/modules ] || $sudo mkdir -p /lib/modules

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${need[*]}"
# Keep Debian from starting a system-wide sshd: the tests start their own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || true
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
