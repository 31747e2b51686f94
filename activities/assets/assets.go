package assets

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/activities/nodefiles"
)

// Kubeconfig renders a kubeconfig (render.kubeconfig).
func Kubeconfig(_ context.Context, in render.KubeconfigInput) (render.FileResult, error) {
	return file(nodefiles.Kubeconfig(in))
}

// KubeletConfig renders the KubeletConfiguration (render.kubelet-config).
func KubeletConfig(_ context.Context, in render.KubeletConfigInput) (render.FileResult, error) {
	return file(nodefiles.KubeletConfig(in))
}

// KubeletUnit renders kubelet.service (render.kubelet-unit).
func KubeletUnit(_ context.Context, in render.KubeletUnitInput) (render.FileResult, error) {
	return file(nodefiles.KubeletUnit(in))
}

// BridgeCNI renders a node's bridge CNI network config (render.bridge-cni).
func BridgeCNI(_ context.Context, in render.BridgeCNIInput) (render.FileResult, error) {
	return file(nodefiles.BridgeCNIConfig(in))
}

// SetImage gives a static pod manifest's container another image
// (render.set-image).
func SetImage(_ context.Context, in render.SetImageInput) (render.SetImageResult, error) {
	res, err := nodefiles.SetImage(in)
	if err != nil {
		return res, classify(err)
	}
	return res, nil
}

// StaticPods renders the control plane's static pod manifests
// (render.static-pods).
func StaticPods(_ context.Context, in render.ControlPlaneInput) (render.StaticPodsResult, error) {
	pods, err := nodefiles.StaticPods(in)
	if err != nil {
		return render.StaticPodsResult{}, classify(err)
	}
	out := render.StaticPodsResult{Files: make(map[string]string, len(pods))}
	for name, data := range pods {
		out.Files[name] = string(data)
	}
	return out, nil
}

func file(data []byte, err error) (render.FileResult, error) {
	if err != nil {
		return render.FileResult{}, classify(err)
	}
	return render.FileResult{Content: string(data)}, nil
}

// classify makes a renderer's refusal non-retryable: the same input fails
// the same way every time.
func classify(err error) error {
	var fe *nodefiles.FieldError
	if errors.As(err, &fe) {
		return temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	return err
}
