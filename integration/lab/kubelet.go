package lab

import (
	"context"
	"fmt"

	"kedge.dev/kedge/integration/testhosts"
)

// KubeletImage is the image the lab's kubelets start with. Its tag is the
// version the simulator reports, so a swap is visible on the Node.
const KubeletImage = "quay.io/poseidon/kubelet:v1.35.3"

// InstallKubelet joins a lab host to a cluster the way seeds 000/001 lay a
// node out: a kubelet.service whose ExecStart runs ${KUBELET_IMAGE} through
// the container stand-in (the image's entrypoint is the kubelet: flags
// only), the kubeconfig in /etc/kubernetes, the bridge CNI config
// node-join writes, and an image map that sends quay.io/poseidon/kubelet
// to the kubelet simulator. Then it starts the kubelet, which registers
// Node `node`. kubeconfig should be the node's own credentials (e.g.
// controlplane's NodeKubeconfig), never cluster-admin's.
func InstallKubelet(ctx context.Context, h *testhosts.Host, kubeconfig []byte, node, image string) error {
	files := []struct{ path, content string }{
		{"/etc/kubernetes/kubelet.conf", string(kubeconfig)},
		{"/etc/kedge-lab/images", "quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n"},
		{"/etc/systemd/system/kubelet.service", "[Service]\nEnvironment=KUBELET_IMAGE=" + image +
			"\nExecStart=docker run --rm --name kubelet -v /etc/kubernetes:/etc/kubernetes:ro -v /etc/cni/net.d:/etc/cni/net.d:ro ${KUBELET_IMAGE} --kubeconfig=/etc/kubernetes/kubelet.conf --hostname-override=" + node + "\n"},
	}
	// The node is NotReady until its runtime has a network.
	if err := testhosts.WriteCNIConfig(h); err != nil {
		return err
	}
	for _, f := range files {
		if err := h.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("kubelet on %s: %w", h.Name, err)
		}
	}
	if out, err := h.Exec(ctx, "systemctl", "start", "kubelet"); err != nil {
		return fmt.Errorf("start kubelet on %s: %w: %s", h.Name, err, out)
	}
	return nil
}
