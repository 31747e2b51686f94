package host

import (
	"time"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// LayoutAction reads how the host runs Kubernetes (layout.Discover).
const LayoutAction = "host.layout"

// LayoutInput names the host and, optionally, the layouts the runbook
// works on.
type LayoutInput struct {
	Target target.SSH `json:"target"`
	// Require, when set, fails the action non-retryably unless the
	// host's layout is one of these (kedge, typhoon-flatcar,
	// typhoon-fcos, none).
	Require []string `json:"require,omitempty" doc:"the layouts the runbook works on (kedge, typhoon-flatcar, typhoon-fcos, none); any other fails before anything changes"`
	// NodeName, when set, is the Node name the inventory gives the host
	// (its nodeName, else its name): a kubelet that registers under
	// another fails the action non-retryably (NodeNameMismatch). A host
	// with no kubelet yet passes.
	NodeName string `json:"nodeName,omitempty" doc:"the Node name the inventory gives the host (host.nodeName); a kubelet registering under another name (its --hostname-override, else the host name) fails before anything changes, naming both and where the kubelet's was read"`
}

// LayoutResult is the host's layout.
type LayoutResult = layout.Layout

func init() {
	spec.Register(spec.Row{Name: LayoutAction, Doc: "read how the host runs Kubernetes: its layout (kedge, typhoon-flatcar, typhoon-fcos, none, unknown), the kubelet's unit, drop-ins, image and files, etcd's mode and members, the cluster DNS, the CA and key files; with require, refuse any other layout before anything changes",
		In: LayoutInput{}, Out: LayoutResult{}, Timeout: 2 * time.Minute,
		Summary: `read the layout{{.On}}`})
}
