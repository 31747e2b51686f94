package layout

import "fmt"

// NodeNameError is a host whose kubelet registers its Node under another
// name than the inventory gives it.
type NodeNameError struct {
	// Host is the inventory's name of the host.
	Host string
	// Inventory is the Node name the inventory gives it: its nodeName,
	// else its name.
	Inventory string
	// Kubelet is the name the kubelet registers, From where it was read.
	Kubelet, From string
}

func (e *NodeNameError) Error() string {
	inv := fmt.Sprintf("the inventory sets nodeName %q for it", e.Inventory)
	fix := fmt.Sprintf("set `nodeName: %s` for %s in the inventory (or, if %q is right, the kubelet's --hostname-override)", e.Kubelet, e.Host, e.Inventory)
	if e.Inventory == e.Host {
		inv = fmt.Sprintf("the inventory names it %q and sets no other nodeName", e.Host)
		fix = fmt.Sprintf("set `nodeName: %s` for %s in the inventory", e.Kubelet, e.Host)
	}
	return fmt.Sprintf("%s: its kubelet registers the Node as %q (%s), but %s: Kedge's Node actions (cordon, drain, wait, delete) would look for Node %q, not this host's. Refused; %s",
		e.Host, e.Kubelet, e.From, inv, e.Inventory, fix)
}

// CheckNodeName is the Node name rule: every runbook that acts on a Node
// acts on the one the host's kubelet registers. It returns nil when the
// kubelet's name (NodeName, read from NodeNameFrom) is the one the
// inventory gives the host (nodeName: its nodeName, else its name), or
// when there is no kubelet to say (a bare host, which node-join sets up
// under the inventory's name), else a *NodeNameError naming the host, both
// names and where the kubelet's was read.
func (l Layout) CheckNodeName(host, nodeName string) error {
	if l.Kubelet == nil || l.NodeName == "" || nodeName == "" || l.NodeName == nodeName {
		return nil
	}
	return &NodeNameError{Host: host, Inventory: nodeName, Kubelet: l.NodeName, From: l.NodeNameFrom}
}
