package kubeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.temporal.io/sdk/activity"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MintedByLabel on a bootstrap token's Secret is a digest of the activity
// that minted it (namespace, workflow, run, activity id).
const MintedByLabel = "kedge.dev/minted-by"

// mintKey is the digest naming the activity minting a token, "" outside
// an activity. Every attempt of one activity has the same key, so a retry
// (a worker killed after its Create reached the API server but before
// its result reached Temporal) finds the token its earlier attempt made
// instead of leaving that one behind, unknown to the revoke step.
func mintKey(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	info := activity.GetInfo(ctx)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s", info.Namespace,
		info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID))
	return hex.EncodeToString(sum[:])
}

// tokenIDFor is a bootstrap token ID ([a-z0-9]{6}) derived from key.
func tokenIDFor(key string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	sum := sha256.Sum256([]byte("bootstrap-token-id\x00" + key))
	id := make([]byte, 6)
	for i := range id {
		id[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(id)
}

// replaceOwnToken replaces the Secret of a token an earlier attempt of
// the same activity made (its secret half never reached anyone); a
// Secret of that name minted by anything else is left alone: an error.
func replaceOwnToken(ctx context.Context, cs kubernetes.Interface, sec *corev1.Secret, key string) error {
	cur, err := cs.CoreV1().Secrets(sec.Namespace).Get(ctx, sec.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Labels[MintedByLabel] != key[:63] {
		return fmt.Errorf("%s/%s exists and was not minted by this step", sec.Namespace, sec.Name)
	}
	cur.Data, cur.StringData = sec.Data, nil
	_, err = cs.CoreV1().Secrets(sec.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}
