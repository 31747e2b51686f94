// Command kubelet is the test world's kubelet simulator, the one simulated
// part of Kedge's test world (a real kubelet cannot run on the test
// machine). A test host's kubelet unit starts it through the container
// stand-in (`docker run IMAGE FLAGS...`: the image's entrypoint is the
// kubelet), and it behaves, as far as a runbook can see, like the real
// kubelet v1.35 started with the same flags:
//
//   - Its command line is parsed as the real one's (pflag): only the real
//     kubelet's flags (flags.go), no positional argument ("unknown command
//     kubelet"), "failed to parse kubelet flag: unknown flag: --foo".
//     --node-labels is repeatable and takes bare keys; labels a kubelet may
//     not set (kubernetes.io namespaces) are refused.
//
//   - The --config file is decoded strictly into the KubeletConfiguration
//     type: an unknown or duplicate field is an error. (The real kubelet
//     falls back to a lenient decoding for v1beta1 and only logs; a field
//     it would ignore is a rendering mistake, so the simulator refuses it.)
//
//   - The node is NotReady (KubeletNotReady, "container runtime network
//     not ready: ... cni plugin not initialized") until a valid CNI config
//     (*.conf, *.conflist, *.json) is in /etc/cni/net.d, and only
//     host-network pods run meanwhile; it posts Ready within a
//     KEDGE_LAB_HEARTBEAT of one appearing.
//
//   - --config reads a KubeletConfiguration (kubelet.config.k8s.io/v1beta1):
//     staticPodPath, podLogsDir, authentication (x509 clientCAFile,
//     anonymous), tlsCertFile/tlsPrivateKeyFile, port, healthzBindAddress,
//     healthzPort and registerWithTaints.
//
//   - --kubeconfig with --bootstrap-kubeconfig does TLS bootstrap: a CSR
//     for system:node:NAME signed by kubernetes.io/kube-apiserver-client-kubelet,
//     the pair kept in CERT-DIR/kubelet-client-current.pem and a kubeconfig
//     written at --kubeconfig that points at it.
//
//   - It registers its Node (--hostname-override, --node-ip, --node-labels,
//     registerWithTaints or --register-with-taints, which replaces it),
//     posts its status at start, when it changes and every 5 minutes,
//     and renews its Lease every 10 s (the real kubelet's cadence),
//     reports the version of the image it was started with (so an image
//     swap shows), marks the pods scheduled to it Running and Ready, and
//     completes the deletion of pods evicted from it.
//
//   - It runs static pods for real: each container of each manifest in
//     staticPodPath is a detached process of the program its image maps to
//     in /etc/kedge-lab/images (the container stand-in's map), which
//     survives a kubelet restart and is adopted by the next kubelet; it
//     publishes a mirror pod for each. The processes run as a runtime runs
//     pods, beside the kubelet's container, not in it: in the host's mount
//     namespace (PID 1's, the container having --pid host), so a hostPath
//     such as etcd's /var/lib/etcd is the host's directory whatever the
//     kubelet's volumes are, and outlives the kubelet container. (The
//     process sees the whole host, not only its hostPath volumes.)
//
//   - It runs their probes as the kubelet's prober does (probes.go):
//     startup, then liveness and readiness, httpGet and tcpSocket, at the
//     pod's IP unless a probe names a host; a container is Started once its
//     startup probe passed and Ready once its readiness probe passes; one
//     that fails its startup or liveness probe failureThreshold times in a
//     row is stopped and restarted (restarts counted, with backoff).
//
//   - It serves HTTPS on NODE-IP:10250 (/healthz, /containerLogs) and
//     /healthz over http on healthzBindAddress:healthzPort (on NODE-IP
//     instead of loopback: the simulated kubelets of a machine share its
//     network). Without --node-ip, the node IP is the one in
//     /etc/kedge-lab/node-ip, standing for the real kubelet's detection;
//     with neither, there is no HTTPS port.
//
// Flags of the real kubelet it does not simulate are accepted and ignored.
// Its own settings, for tests, are environment variables, not flags:
// KEDGE_LAB_IMAGES (the image map), KEDGE_LAB_NODE_IP_FILE,
// KEDGE_LAB_HEARTBEAT (how often it looks at its network, Node and pods,
// 2s; what it posts follows the real kubelet's cadence),
// KEDGE_LAB_CNI_CONF_DIR (/etc/cni/net.d) and KEDGE_LAB_HOST_MOUNT_NS (the
// mount namespace static pods run in: /proc/1/ns/mnt when readable, else
// the simulator's own; "none" for the simulator's own).
// Where it is, the files it keeps:
//
//	ROOT-DIR/static-pods/NS_NAME.json   pid, start time, manifest hash of each static pod's containers
//	CERT-DIR/kubelet-client-current.pem client certificate and key (symlink to kubelet-client-DATE.pem, 0600)
//	CERT-DIR/kubelet.crt, kubelet.key   self-signed serving pair, made when the config names none
//	POD-LOGS-DIR/NS_NAME/CONTAINER.log  a static pod container's stdout and stderr
//
// ROOT-DIR is --root-dir (/var/lib/kubelet), CERT-DIR --cert-dir
// (ROOT-DIR/pki), POD-LOGS-DIR the config's podLogsDir (/var/log/pods).
//
// It is test infrastructure only: it must never run on a real node, and it
// never stops a static pod because it itself stops.
package main
