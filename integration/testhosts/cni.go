package testhosts

import (
	"fmt"
	"net"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/render"
)

// WriteCNIConfig gives the host the bridge network node-join would give
// it (render.BridgeCNIConfigPath), for nodes a test starts without
// node-join: the kubelet, real or simulated, keeps a node NotReady until
// its container runtime has a network. The node's subnet of the default
// pod network is the last byte of the host's address, so the hosts of a
// test world do not share one.
func WriteCNIConfig(h *Host) error {
	ip := net.ParseIP(h.Address).To4()
	if ip == nil {
		return fmt.Errorf("CNI config for %s: %q is not an IPv4 address", h.Name, h.Address)
	}
	nodes := make([]string, int(ip[3])+1)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	conf, err := nodefiles.BridgeCNIConfig(render.BridgeCNIInput{Nodes: nodes, Node: nodes[ip[3]]})
	if err != nil {
		return fmt.Errorf("CNI config for %s: %w", h.Name, err)
	}
	if err := h.WriteFile(nodefiles.BridgeCNIConfigPath, conf, 0o644); err != nil {
		return fmt.Errorf("CNI config for %s: %w", h.Name, err)
	}
	return nil
}
