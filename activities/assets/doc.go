// Package assets holds the render.* actions: the renderers of
// activities/nodefiles (kubeconfigs, the kubelet's configuration and units,
// the control plane's static pods) as steps a runbook can run, so the
// files a host is given are visible, and retried, like every other step.
//
// The actions only compute: writing the files is for the host actions.
// What they return can be a credential (a kubeconfig holding a token or a
// key); it travels through Temporal sealed by the payload codec, and these
// actions never log it.
package assets
