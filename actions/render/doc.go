// Package render declares the render actions' names and their input and
// result types: render.kubeconfig, render.kubelet-config,
// render.kubelet-unit, render.bridge-cni and render.static-pods. It is pure
// data, so the action table, the runbook language and the workflow can
// name them without linking client-go or the Kubernetes API types;
// activities/nodefiles renders the files and activities/assets runs the
// renderers as actions. It must never do I/O.
package render
