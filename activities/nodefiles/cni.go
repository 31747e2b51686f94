package nodefiles

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"slices"

	"kedge.dev/kedge/actions/render"
)

// Defaults of BridgeCNIInput.
const (
	// DefaultPodCIDR is the pod network when the inventory names none.
	DefaultPodCIDR = "10.244.0.0/16"
	// DefaultNodeMaskSizeIPv4 and DefaultNodeMaskSizeIPv6 are the size of
	// each node's share of the pod network, as kube-controller-manager's
	// --node-cidr-mask-size defaults them.
	DefaultNodeMaskSizeIPv4 = 24
	DefaultNodeMaskSizeIPv6 = 64
	// BridgeName is the Linux bridge the pods of a node are plugged into.
	BridgeName = "cni0"
	// BridgeNetworkName is the CNI network's name.
	BridgeNetworkName = "kedge-bridge"
)

// cniConfList is a CNI network configuration list (CNI spec 1.0).
type cniConfList struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type bridgePlugin struct {
	Type        string   `json:"type"`
	Bridge      string   `json:"bridge"`
	IsGateway   bool     `json:"isGateway"`
	IPMasq      bool     `json:"ipMasq"`
	HairpinMode bool     `json:"hairpinMode"`
	IPAM        ipamConf `json:"ipam"`
}

type ipamConf struct {
	Type   string          `json:"type"`
	Ranges [][]ipamRange   `json:"ranges"`
	Routes []ipamRouteConf `json:"routes"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type ipamRouteConf struct {
	Dst string `json:"dst"`
}

type portmapPlugin struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// NodeSubnet is the node's share of the pod network: the index-th subnet
// of size maskSize in podCIDR. It fails when podCIDR has fewer.
func NodeSubnet(podCIDR string, maskSize, index int) (*net.IPNet, error) {
	_, network, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	ones, bits := network.Mask.Size()
	if maskSize < ones || maskSize > bits {
		return nil, fmt.Errorf("a /%d per node does not fit in %s", maskSize, podCIDR)
	}
	if maskSize-ones < 62 && big.NewInt(int64(index)).Cmp(new(big.Int).Lsh(big.NewInt(1), uint(maskSize-ones))) >= 0 {
		return nil, fmt.Errorf("%s has %d subnets of /%d; node %d has none", podCIDR, 1<<(maskSize-ones), maskSize, index+1)
	}
	base := new(big.Int).SetBytes(network.IP)
	base.Add(base, new(big.Int).Lsh(big.NewInt(int64(index)), uint(bits-maskSize)))
	ip := base.FillBytes(make([]byte, len(network.IP)))
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(maskSize, bits)}, nil
}

func bridgeCNIWithDefaults(in render.BridgeCNIInput) render.BridgeCNIInput {
	if in.PodCIDR == "" {
		in.PodCIDR = DefaultPodCIDR
	}
	if in.NodeMaskSize == 0 {
		in.NodeMaskSize = DefaultNodeMaskSizeIPv4
		if ip, _, err := net.ParseCIDR(in.PodCIDR); err == nil && ip.To4() == nil {
			in.NodeMaskSize = DefaultNodeMaskSizeIPv6
		}
	}
	return in
}

// bridgeCNISubnet validates the input and returns the node's subnet.
func bridgeCNISubnet(in render.BridgeCNIInput) (*net.IPNet, error) {
	var p problems
	checkCIDR(&p, "podCIDR", in.PodCIDR)
	checkDNSName(&p, "node", in.Node)
	index := slices.Index(in.Nodes, in.Node)
	if in.Node != "" && index < 0 {
		p.add("nodes", "%q is not among the %d nodes", in.Node, len(in.Nodes))
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	subnet, err := NodeSubnet(in.PodCIDR, in.NodeMaskSize, index)
	if err != nil {
		p.add("nodeMaskSize", "%s", err.Error())
		return nil, p.err()
	}
	return subnet, nil
}

// BridgeCNIConfig renders the node's CNI network (BridgeCNIConfigPath): a
// Linux bridge (BridgeName) the pods are plugged into, the node as their
// gateway, traffic leaving the pod network masqueraded, addresses from the
// node's subnet of the pod network (host-local), then host ports
// (portmap). The container runtime sets up each pod's loopback itself.
//
// Pods reach pods of other nodes only where the network routes each node's
// subnet to it; this is the simplest network that makes a node Ready, for
// clusters that run their own CNI plugin later or need no pod-to-pod
// traffic across nodes.
func BridgeCNIConfig(in render.BridgeCNIInput) ([]byte, error) {
	in = bridgeCNIWithDefaults(in)
	subnet, err := bridgeCNISubnet(in)
	if err != nil {
		return nil, err
	}
	defaultRoute := "0.0.0.0/0"
	if subnet.IP.To4() == nil {
		defaultRoute = "::/0"
	}
	conf := cniConfList{
		CNIVersion: "1.0.0",
		Name:       BridgeNetworkName,
		Plugins: []any{
			bridgePlugin{
				Type: "bridge", Bridge: BridgeName, IsGateway: true, IPMasq: true, HairpinMode: true,
				IPAM: ipamConf{
					Type:   "host-local",
					Ranges: [][]ipamRange{{{Subnet: subnet.String()}}},
					Routes: []ipamRouteConf{{Dst: defaultRoute}},
				},
			},
			portmapPlugin{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	out, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render CNI config: %w", err)
	}
	// JSON has no comments: the file says who wrote it by its name.
	return append(out, '\n'), nil
}
