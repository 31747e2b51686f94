package main

// The flags of the real kubelet v1.35 (`kubelet --help`, besides -h/--help,
// -v/--v and --version), so the simulator refuses every other flag as the
// real kubelet does ("unknown flag: --foo"). TestKubeletFlagsAreTheRealOnes
// checks the lists against the real binary when KEDGE_KUBE_TOOLS names it.

// realBoolFlags take no value: --flag or --flag=false.
var realBoolFlags = []string{
	"anonymous-auth", "authentication-token-webhook", "cgroups-per-qos",
	"contention-profiling", "cpu-cfs-quota",
	"enable-controller-attach-detach", "enable-debugging-handlers",
	"enable-load-reader", "enable-server", "exit-on-lock-contention",
	"experimental-allocatable-ignore-eviction", "fail-cgroupv1",
	"fail-swap-on", "kernel-memcg-notification",
	"local-storage-capacity-isolation", "log-cadvisor-usage",
	"log-json-split-stream", "log-text-split-stream",
	"make-iptables-util-chains", "protect-kernel-defaults", "register-node",
	"rotate-certificates", "rotate-server-certificates", "runonce",
	"seccomp-default", "serialize-image-pulls", "storage-driver-secure",
}

// realValueFlags take one: --flag=value or --flag value.
var realValueFlags = []string{
	"address", "allowed-unsafe-sysctls", "application-metrics-count-limit",
	"authentication-token-webhook-cache-ttl", "authorization-mode",
	"authorization-webhook-cache-authorized-ttl",
	"authorization-webhook-cache-unauthorized-ttl", "boot-id-file",
	"bootstrap-kubeconfig", "cert-dir", "cgroup-driver", "cgroup-root",
	"client-ca-file", "cloud-provider", "cluster-dns", "cluster-domain",
	"config", "config-dir", "container-hints", "container-log-max-files",
	"container-log-max-size", "container-runtime-endpoint", "containerd",
	"containerd-namespace", "cpu-cfs-quota-period", "cpu-manager-policy",
	"cpu-manager-policy-options", "cpu-manager-reconcile-period",
	"enforce-node-allocatable", "event-burst", "event-qps",
	"event-storage-age-limit", "event-storage-event-limit", "eviction-hard",
	"eviction-max-pod-grace-period", "eviction-minimum-reclaim",
	"eviction-pressure-transition-period", "eviction-soft",
	"eviction-soft-grace-period", "experimental-mounter-path",
	"feature-gates", "file-check-frequency", "global-housekeeping-interval",
	"hairpin-mode", "healthz-bind-address", "healthz-port",
	"hostname-override", "housekeeping-interval", "http-check-frequency",
	"image-credential-provider-bin-dir", "image-credential-provider-config",
	"image-gc-high-threshold", "image-gc-low-threshold",
	"image-service-endpoint", "kube-api-burst", "kube-api-content-type",
	"kube-api-qps", "kube-reserved", "kube-reserved-cgroup", "kubeconfig",
	"kubelet-cgroups", "lock-file", "log-flush-frequency",
	"log-json-info-buffer-size", "log-text-info-buffer-size",
	"logging-format", "machine-id-file", "manifest-url",
	"manifest-url-header", "max-open-files", "max-pods",
	"maximum-dead-containers", "maximum-dead-containers-per-container",
	"memory-manager-policy", "minimum-container-ttl-duration",
	"minimum-image-ttl-duration", "node-ip", "node-labels",
	"node-status-max-images", "node-status-update-frequency", "oom-score-adj",
	"pod-cidr", "pod-manifest-path", "pod-max-pids", "pods-per-core", "port",
	"provider-id", "qos-reserved", "read-only-port", "register-with-taints",
	"registry-burst", "registry-qps", "reserved-cpus", "reserved-memory",
	"resolv-conf", "root-dir", "runtime-cgroups", "runtime-request-timeout",
	"storage-driver-buffer-duration", "storage-driver-db",
	"storage-driver-host", "storage-driver-password", "storage-driver-table",
	"storage-driver-user", "streaming-connection-idle-timeout",
	"sync-frequency", "system-cgroups", "system-reserved",
	"system-reserved-cgroup", "tls-cert-file", "tls-cipher-suites",
	"tls-min-version", "tls-private-key-file", "topology-manager-policy",
	"topology-manager-policy-options", "topology-manager-scope", "vmodule",
	"volume-plugin-dir", "volume-stats-agg-period",
}
