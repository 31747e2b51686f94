#!/usr/bin/env bash
# layers.sh: the dependency rules of Kedge's packages (run by `make lint`).
#
# - The runbook language (runbooks/...) and the engine (workflows/...) link
#   no I/O: no SSH, SFTP, Vault or Kubernetes client, and no activity
#   package; actions are known to them only through the action table
#   (actions/...), which is pure data.
# - Nothing under activities/ imports the runbook language.
# - An activity package imports no other activity package but sshpool (the
#   SSH transport) and nodefiles (pure renderers): activity packages talk to
#   each other through small interfaces, with the types of actions/...
# - The worker does not link the webhook server (chatops).
# - The webhook server and the Slack messages (slackmsg) link no activity
#   package: what chatops and the chat.follow activity share (messages,
#   the response_url policy) lives in slackmsg and internal/responseurl,
#   below both.
# - internal/ is the bottom floor: it imports no Kedge package above it
#   (only actions/errtype, the error types' names, which imports no Kedge
#   package).
# - One front door: outside the runbook language, only runs.Prepare
#   compiles a plan (plan.Compile), so every door refuses alike.
# - The FleetLock protocol (fleetlock) is the standard library's only: its
#   decisions come through its Coordinator, never from Temporal directly.
# - The engine stays small: `go list -deps ./workflows` under MAX_DEPS.
set -euo pipefail
GO=${GO:-go}
MAX_DEPS=${MAX_DEPS:-600}
fail=0

forbidden='^(golang\.org/x/crypto/ssh|github\.com/pkg/sftp|github\.com/hashicorp/vault/api|k8s\.io/client-go|k8s\.io/kubectl|kedge\.dev/kedge/activities)(/|$)'
for pkg in ./workflows/... ./runbooks/... ./actions/...; do
	# Each package's own dependency closure, so the message names the
	# package that pulls the forbidden one in.
	for p in $($GO list "$pkg"); do
		bad=$($GO list -deps "$p" | grep -E "$forbidden" || true)
		if [ -n "$bad" ]; then
			echo "layers: $p links I/O or activity packages (only actions/... may describe actions to it):"
			# The kedge packages that bring them in, and the first few
			# forbidden ones.
			echo "$bad" | grep '^kedge.dev/' | sed 's/^/  /' || true
			echo "$bad" | grep -v '^kedge.dev/' | head -5 | sed 's/^/  /'
			fail=1
		fi
	done
done

back=$($GO list -f '{{.ImportPath}}: {{join .Imports " "}}' ./activities/... | grep -E ' kedge\.dev/kedge/runbooks(/| |$)' || true)
if [ -n "$back" ]; then
	echo "layers: activity packages import the runbook language:"
	echo "$back" | cut -d: -f1 | sed 's/^/  /'
	fail=1
fi

allowed='^kedge\.dev/kedge/activities/(sshpool|nodefiles)$'
cross=$($GO list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./activities/... |
	awk -v allowed="$allowed" '{ for (i = 2; i <= NF; i++) if ($i ~ /^kedge\.dev\/kedge\/activities\// && $i !~ allowed) print "  " $1 " imports " $i }')
if [ -n "$cross" ]; then
	echo "layers: an activity package imports another (only sshpool and nodefiles may be; pass the others' types from actions/... and call them through an interface):"
	echo "$cross"
	fail=1
fi

up=$($GO list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./internal/... |
	awk '{for (i = 2; i <= NF; i++) if ($i ~ /^kedge\.dev\/kedge\// && $i !~ /^kedge\.dev\/kedge\/internal\// && $i != "kedge.dev/kedge/actions/errtype") print "  " $1 " imports " $i}')
if [ -n "$up" ]; then
	echo "layers: a package under internal/ imports one above it (internal/ is the bottom floor):"
	echo "$up"
	fail=1
fi

leaf=$($GO list -f '{{join .Imports "\n"}}' ./actions/errtype | grep '^kedge\.dev/kedge/' || true)
if [ -n "$leaf" ]; then
	echo "layers: actions/errtype imports a Kedge package (everything imports it, internal/ too):"
	echo "$leaf" | sed 's/^/  /'
	fail=1
fi

nonstd=$($GO list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./fleetlock | grep -vx 'kedge.dev/kedge/fleetlock' || true)
if [ -n "$nonstd" ]; then
	echo "layers: fleetlock links more than the standard library (its decisions come through its Coordinator):"
	echo "$nonstd" | head -5 | sed "s/^/  /"
	fail=1
fi

if $GO list -deps ./worker | grep -qx 'kedge.dev/kedge/chatops'; then
	echo "layers: the worker links the webhook server (chatops); it needs only activities/chat"
	fail=1
fi

for p in ./chatops ./slackmsg; do
	acts=$($GO list -deps "$p" | grep '^kedge\.dev/kedge/activities/' || true)
	if [ -n "$acts" ]; then
		echo "layers: $p links activity packages (what chatops and chat.follow share lives in slackmsg and internal/responseurl):"
		echo "$acts" | sed 's/^/  /'
		fail=1
	fi
done

doors=$(grep -rln --include='*.go' 'plan\.Compile(' . | grep -vE '^\./(runbooks|runs)/' || true)
if [ -n "$doors" ]; then
	echo "layers: plan.Compile called outside runs.Prepare (the one front door; prepare a start with runs.Prepare):"
	echo "$doors" | sed 's/^/  /'
	fail=1
fi

n=$($GO list -deps ./workflows | wc -l)
if [ "$n" -ge "$MAX_DEPS" ]; then
	echo "layers: ./workflows links $n packages, the budget is under $MAX_DEPS"
	fail=1
fi
exit $fail
