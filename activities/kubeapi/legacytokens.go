package kubeapi

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/internal/satoken"
)

// LegacyTokens lists the legacy service-account token Secrets (type
// kubernetes.io/service-account-token) the key signed
// (kube.legacy-tokens). Unlike a pod's projected token, nothing renews
// them: a CA rotation that drops the key breaks whatever uses one, so
// the operator sees them before approving the drop. Only each token's
// header is read; no token leaves the activity.
func (a *Activities) LegacyTokens(ctx context.Context, in kube.LegacyTokensInput) (kube.LegacyTokensResult, error) {
	res := kube.LegacyTokensResult{SignedBy: []string{}}
	kid, err := satoken.KeyID(in.PublicKey)
	if err != nil {
		return res, invalidInput("publicKey: " + err.Error())
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return res, err
	}
	opts := metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeServiceAccountToken), Limit: 500}
	for {
		list, err := cs.CoreV1().Secrets("").List(ctx, opts)
		if err != nil {
			return res, clusterError("list the service-account token Secrets", err)
		}
		for _, s := range list.Items {
			if s.Type != corev1.SecretTypeServiceAccountToken {
				continue
			}
			res.Total++
			if satoken.HeaderKeyID(string(s.Data[corev1.ServiceAccountTokenKey])) == kid {
				res.SignedBy = append(res.SignedBy, fmt.Sprintf("%s/%s (%s)", s.Namespace, s.Name, s.Annotations[corev1.ServiceAccountNameKey]))
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.Sort(res.SignedBy)
	return res, nil
}
