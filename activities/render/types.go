package render

import api "kedge.dev/kedge/actions/render"

// The renderers' inputs, declared in actions/render: the render actions'
// inputs.
type (
	KubeconfigInput    = api.KubeconfigInput
	KubeletConfigInput = api.KubeletConfigInput
	KubeletUnitInput   = api.KubeletUnitInput
	BridgeCNIInput     = api.BridgeCNIInput
	ControlPlaneInput  = api.ControlPlaneInput
	EtcdMember         = api.EtcdMember
	ControlPlaneImages = api.ControlPlaneImages
)
