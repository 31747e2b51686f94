package typhoon

import (
	"bytes"
	"fmt"
)

// The world's one patch. Kedge's test world runs every host in one
// network namespace (each host has its own loopback address, 127.x) and
// on a machine without SELinux; Typhoon's files assume a machine each and
// Fedora CoreOS's SELinux. These edits, and nothing else, are applied to
// the rendered files; each must match exactly once, so a change upstream
// that moves what they touch fails the world's build instead of being
// patched silently:
//
//   - etcd listens on its host's address, not 0.0.0.0 (etcd.env's three
//     ETCD_LISTEN_* URLs), so three members can share the ports;
//   - kube-apiserver, kube-controller-manager and kube-scheduler bind their
//     host's address ($(POD_IP), which a static pod with hostNetwork has
//     as its node's IP), for the same reason, and the liveness probes of
//     the controller manager and the scheduler ask that address (a probe
//     without a host asks the pod's IP) instead of 127.0.0.1;
//   - Fedora CoreOS's kubelet.service does not mount /etc/selinux and
//     /sys/fs/selinux, which this machine does not have (podman refuses a
//     volume whose source is missing), and its controllers' layout script
//     does not relabel /etc/kubernetes/pki (chcon fails without SELinux).
//
// One more deviation is in the PKI (see PKI.Assets): etcd's peer
// certificate also names 127.0.0.1.

// Edit is one change of the patch: Old, which must occur exactly once in
// the file at Path, becomes New.
type Edit struct {
	Path, Old, New string
}

// HostPatch is the patch's edits of h's files when its address is ip.
func HostPatch(h Host, ip string) []Edit {
	var edits []Edit
	if h.Controller {
		for _, l := range []string{"ETCD_LISTEN_CLIENT_URLS=https://%s:2379", "ETCD_LISTEN_PEER_URLS=https://%s:2380", "ETCD_LISTEN_METRICS_URLS=http://%s:2381"} {
			edits = append(edits, Edit{Path: EtcdEnv, Old: fmt.Sprintf(l, "0.0.0.0") + "\n", New: fmt.Sprintf(l, ip) + "\n"})
		}
	}
	if h.Flavor == FCOS && h.Controller {
		edits = append(edits, Edit{Path: "/opt/bootstrap/layout", Old: "chcon -R -u system_u -t container_file_t /etc/kubernetes/pki\n"})
	}
	if h.Flavor == FCOS {
		for _, v := range []string{"/etc/selinux:/etc/selinux", "/sys/fs/selinux:/sys/fs/selinux"} {
			edits = append(edits, Edit{Path: KubeletUnit, Old: "  --volume " + v + " \\\n", New: ""})
		}
	}
	return edits
}

// AssetsPatch is the patch's edits of assets_dist's static manifests.
func AssetsPatch() []Edit {
	podIP := `
    env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP`
	return []Edit{
		{Path: "static-manifests/kube-apiserver.yaml", Old: "    - --advertise-address=$(POD_IP)\n",
			New: "    - --advertise-address=$(POD_IP)\n    - --bind-address=$(POD_IP)\n"},
		{Path: "static-manifests/kube-controller-manager.yaml", Old: "    - --allocate-node-cidrs=true\n",
			New: "    - --allocate-node-cidrs=true\n    - --bind-address=$(POD_IP)\n"},
		{Path: "static-manifests/kube-controller-manager.yaml", Old: "    - --use-service-account-credentials=true\n",
			New: "    - --use-service-account-credentials=true" + podIP + "\n"},
		{Path: "static-manifests/kube-scheduler.yaml", Old: "    - --leader-elect=true\n",
			New: "    - --leader-elect=true\n    - --bind-address=$(POD_IP)" + podIP + "\n"},
		probeAtPodIP("static-manifests/kube-controller-manager.yaml", 10257),
		probeAtPodIP("static-manifests/kube-scheduler.yaml", 10259),
	}
}

// probeAtPodIP drops the host (127.0.0.1) of the liveness probe on port.
func probeAtPodIP(path string, port int) Edit {
	rest := fmt.Sprintf("        path: /healthz\n        port: %d\n", port)
	return Edit{Path: path, Old: "        host: 127.0.0.1\n" + rest,
		New: "        # host: the pod's IP, which the patch binds\n" + rest}
}

// Apply applies edits to files (path to content) in order; a file that
// holds an edit's result already is refused (patched twice).
func Apply(files map[string][]byte, edits []Edit) error {
	for _, e := range edits {
		data, ok := files[e.Path]
		if !ok {
			return fmt.Errorf("typhoon: patch: no %s", e.Path)
		}
		if e.New != "" && bytes.Contains(data, []byte(e.New)) {
			return fmt.Errorf("typhoon: patch: %s holds %q already", e.Path, e.New)
		}
		if n := bytes.Count(data, []byte(e.Old)); n != 1 {
			return fmt.Errorf("typhoon: patch: %s holds %q %d times, want once", e.Path, e.Old, n)
		}
		files[e.Path] = bytes.Replace(data, []byte(e.Old), []byte(e.New), 1)
	}
	return nil
}
