package actions

import (
	"kedge.dev/kedge/actions/spec"

	// Each area's declaration files register their actions' rows.
	_ "kedge.dev/kedge/actions/certinfo"
	_ "kedge.dev/kedge/actions/check"
	_ "kedge.dev/kedge/actions/etcd"
	_ "kedge.dev/kedge/actions/host"
	_ "kedge.dev/kedge/actions/kube"
	_ "kedge.dev/kedge/actions/pki"
	_ "kedge.dev/kedge/actions/prometheus"
	_ "kedge.dev/kedge/actions/render"
	_ "kedge.dev/kedge/actions/vault"
)

// table is every action, from the rows their declarations register
// (spec.Register, in each action's file under actions/AREA).
var table = func() []Action {
	var out []Action
	for _, r := range spec.Rows() {
		out = append(out, describe(r))
	}
	return out
}()
