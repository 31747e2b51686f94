package assets

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	api "kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/activities/render"
)

// Kubeconfig renders a kubeconfig (render.kubeconfig).
func Kubeconfig(_ context.Context, in api.KubeconfigInput) (api.FileResult, error) {
	return file(render.Kubeconfig(in))
}

// KubeletConfig renders the KubeletConfiguration (render.kubelet-config).
func KubeletConfig(_ context.Context, in api.KubeletConfigInput) (api.FileResult, error) {
	return file(render.KubeletConfig(in))
}

// KubeletUnit renders kubelet.service (render.kubelet-unit).
func KubeletUnit(_ context.Context, in api.KubeletUnitInput) (api.FileResult, error) {
	return file(render.KubeletUnit(in))
}

// BridgeCNI renders a node's bridge CNI network config (render.bridge-cni).
func BridgeCNI(_ context.Context, in api.BridgeCNIInput) (api.FileResult, error) {
	return file(render.BridgeCNIConfig(in))
}

// SetImage gives a static pod manifest's container another image
// (render.set-image).
func SetImage(_ context.Context, in api.SetImageInput) (api.SetImageResult, error) {
	res, err := render.SetImage(in)
	if err != nil {
		return res, classify(err)
	}
	return res, nil
}

// StaticPods renders the control plane's static pod manifests
// (render.static-pods).
func StaticPods(_ context.Context, in api.ControlPlaneInput) (api.StaticPodsResult, error) {
	pods, err := render.StaticPods(in)
	if err != nil {
		return api.StaticPodsResult{}, classify(err)
	}
	out := api.StaticPodsResult{Files: make(map[string]string, len(pods))}
	for name, data := range pods {
		out.Files[name] = string(data)
	}
	return out, nil
}

func file(data []byte, err error) (api.FileResult, error) {
	if err != nil {
		return api.FileResult{}, classify(err)
	}
	return api.FileResult{Content: string(data)}, nil
}

// classify makes a renderer's refusal non-retryable: the same input fails
// the same way every time.
func classify(err error) error {
	var fe *render.FieldError
	if errors.As(err, &fe) {
		return temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, nil)
	}
	return err
}
