package kubeapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

// SetConfigMapData sets one key of a ConfigMap's data
// (kube.set-configmap-data), applied server-side as field manager
// kedge-upgrade, the other keys left to whoever wrote them. A cluster
// without the ConfigMap is no error (Present false). Run again, it
// changes nothing; its undo is the same action with the previous value.
func (a *Activities) SetConfigMapData(ctx context.Context, in kube.SetConfigMapDataInput) (kube.SetConfigMapDataResult, error) {
	bad := func(msg string) error {
		return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
	}
	ns := cmp.Or(in.Namespace, "kube-system")
	for _, n := range [][2]string{{"namespace", ns}, {"name", in.Name}} {
		if errs := validation.IsDNS1123Subdomain(n[1]); len(errs) > 0 {
			return kube.SetConfigMapDataResult{}, bad(fmt.Sprintf("%s %q: %s", n[0], n[1], errs[0]))
		}
	}
	if errs := validation.IsConfigMapKey(in.Key); len(errs) > 0 {
		return kube.SetConfigMapDataResult{}, bad(fmt.Sprintf("key %q: %s", in.Key, errs[0]))
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.SetConfigMapDataResult{}, err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, in.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return kube.SetConfigMapDataResult{}, nil
	}
	if err != nil {
		return kube.SetConfigMapDataResult{}, apiError("", err)
	}
	// Checked once the ConfigMap is found: an undo's previous value is
	// empty where the step found none.
	if in.Value == "" {
		return kube.SetConfigMapDataResult{}, bad("value is empty")
	}
	res := kube.SetConfigMapDataResult{Present: true, Previous: cm.Data[in.Key]}
	if res.Previous == in.Value {
		return res, nil
	}
	data, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": in.Name, "namespace": ns},
		"data":     map[string]string{in.Key: in.Value},
	})
	if err != nil {
		return res, err
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, in.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: upgradeManager, Force: ptr.To(true)}); err != nil {
		return res, apiError("", err)
	}
	res.Changed = true
	return res, nil
}
