package sshhost

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/satoken"

	"kedge.dev/kedge/actions/host"
)

// maxTokenWait bounds WaitPodTokensInput.Wait below the action's
// start-to-close timeout.
const maxTokenWait = 2*time.Hour + 50*time.Minute

// tokenPoll is how often WaitPodTokens looks again.
var tokenPoll = 10 * time.Second

// podTokensScript prints, for every projected service-account token the
// kubelet keeps for the host's pods, the token's header and its path (the
// part before the first dot): the header names the key that signed the
// token and is no secret; the rest of the token never leaves the host.
const podTokensScript = `for f in "$KEDGE_KUBELET_DIR"/pods/*/volumes/kubernetes.io~projected/*/token; do
  [ -f "$f" ] || continue
  h=
  IFS=. read -r h _ <"$f"
  printf '%s %s\n' "${h:--}" "$f"
done`

// WaitPodTokens waits until no pod on the host mounts a projected
// service-account token signed by the old key (host.wait-pod-tokens):
// before a CA rotation drops the old key from the API servers, every
// pod's token must come from the new one, or the pod loses the API until
// its kubelet renews the token. The kubelet renews a projected token at
// 80% of its life (48 minutes for the hour it asks for by default); a
// restarted pod gets a new one at once.
func (a *Activities) WaitPodTokens(ctx context.Context, in host.WaitPodTokensInput) (host.WaitPodTokensResult, error) {
	res, err := a.waitPodTokens(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) waitPodTokens(ctx context.Context, in host.WaitPodTokensInput) (host.WaitPodTokensResult, error) {
	kid, err := satoken.KeyID(in.OldPublicKey)
	if err != nil {
		return host.WaitPodTokensResult{}, invalid("oldPublicKey: " + err.Error())
	}
	var wait time.Duration
	if in.Wait != "" {
		if wait, err = time.ParseDuration(in.Wait); err != nil || wait < 0 || wait > maxTokenWait {
			return host.WaitPodTokensResult{}, invalid(fmt.Sprintf("wait %q: want a duration from 0 to %s", in.Wait, maxTokenWait))
		}
	}
	res := host.WaitPodTokensResult{KeyID: kid, OldKey: []string{}}
	stop := a.heartbeat(ctx, func() any { return map[string]any{"tokens": res.Tokens, "oldKey": len(res.OldKey)} })
	defer stop()
	deadline := time.Now().Add(wait)
	for {
		out, err := a.exec(ctx, in.Target, execSpec{env: "export KEDGE_KUBELET_DIR=" + quote(a.kubeletDir()) + "\n", script: podTokensScript, timeout: time.Minute, limit: 4 << 20})
		if err != nil {
			return res, err
		}
		if out.ExitCode != 0 {
			return res, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("list the pods' tokens on %s: exit %d%s", in.Target.Name(), out.ExitCode, tailLine(out.Stderr))}
		}
		res.Tokens, res.OldKey = tokensSignedBy(out.Stdout, kid)
		if len(res.OldKey) == 0 {
			return res, nil
		}
		if !time.Now().Before(deadline) {
			return res, &typedError{typ: errtype.OldKeyInUse, nonRetryable: true, msg: fmt.Sprintf(
				"%d of %d pod tokens on %s are still signed by the old service-account key (kid %s) after %s: pods %s; "+
					"their kubelet renews a projected token at 80%% of its life: restart those pods or wait, then continue",
				len(res.OldKey), res.Tokens, in.Target.Name(), kid, wait, strings.Join(res.OldKey, ", "))}
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(min(tokenPoll, time.Until(deadline))):
		}
	}
}

// tokensSignedBy reads podTokensScript's output: how many tokens there
// are, and the UIDs of the pods with one whose header names kid.
func tokensSignedBy(out, kid string) (int, []string) {
	n, pods := 0, []string{}
	for line := range strings.Lines(out) {
		header, path, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok {
			continue
		}
		n++
		if satoken.HeaderKeyID(header) != kid {
			continue
		}
		// KUBELET_DIR/pods/UID/volumes/kubernetes.io~projected/VOLUME/token
		if f := strings.Split(path, "/"); len(f) > 5 && !slices.Contains(pods, f[len(f)-5]) {
			pods = append(pods, f[len(f)-5])
		}
	}
	slices.Sort(pods)
	return n, pods
}
