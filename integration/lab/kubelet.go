package lab

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/testhosts"

	"kedge.dev/kedge/actions/render"
)

// KubeletImage is the image the lab's kubelets start with. Its tag is the
// version the simulator reports, so a swap is visible on the Node.
const KubeletImage = "quay.io/poseidon/kubelet:v1.35.3"

// InstallKubelet joins a lab host to a cluster in Kedge's own layout, as
// node-join would have left it: the kubelet.service and
// KubeletConfiguration Kedge renders (the container stand-in runs
// ${KUBELET_IMAGE}, which the image map sends to the kubelet simulator),
// the node's credentials where the TLS bootstrap would have put them, and
// the bridge CNI config node-join writes. Then it starts the kubelet,
// which registers Node `node`. kubeconfig should be the node's own
// credentials (e.g. controlplane's NodeKubeconfig), never
// cluster-admin's.
func InstallKubelet(ctx context.Context, h *testhosts.Host, kubeconfig []byte, node, image string) error {
	unit, err := nodefiles.KubeletUnit(render.KubeletUnitInput{Runtime: nodefiles.RuntimeDocker, Image: image, Node: node, Role: nodefiles.RoleWorker})
	if err != nil {
		return err
	}
	config, err := nodefiles.KubeletConfig(render.KubeletConfigInput{ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return fmt.Errorf("kubelet on %s: %w", h.Name, err)
	}
	var ca []byte
	for _, c := range kc.Clusters {
		ca = c.CertificateAuthorityData
	}
	if len(ca) == 0 {
		return fmt.Errorf("kubelet on %s: the kubeconfig has no CA data", h.Name)
	}
	files := []struct {
		path    string
		content []byte
	}{
		{nodefiles.ClusterCAPath, ca},
		{nodefiles.KubeletKubeconfigPath, kubeconfig},
		{nodefiles.KubeletConfigPath, config},
		{"/etc/kedge-lab/images", []byte("quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n")},
		{nodefiles.KubeletUnitPath, unit},
	}
	// The node is NotReady until its runtime has a network.
	if err := testhosts.WriteCNIConfig(h); err != nil {
		return err
	}
	for _, f := range files {
		if err := h.WriteFile(f.path, f.content, 0o644); err != nil {
			return fmt.Errorf("kubelet on %s: %w", h.Name, err)
		}
	}
	// Enabled, as on a real node: it starts again at a (test host's)
	// reboot.
	if out, err := h.Exec(ctx, "systemctl", "enable", "--now", "kubelet"); err != nil {
		return fmt.Errorf("start kubelet on %s: %w: %s", h.Name, err, out)
	}
	return nil
}
