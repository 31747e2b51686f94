package kube

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// SetConfigMapDataAction is the action name of SetConfigMapData.
const SetConfigMapDataAction = "kube.set-configmap-data"

// SetConfigMapDataInput is one key of a ConfigMap and the value it is to
// hold.
type SetConfigMapDataInput struct {
	Cluster   target.Kube `json:"cluster"`
	Namespace string      `json:"namespace,omitempty" doc:"its namespace (default kube-system)"`
	Name      string      `json:"name" kedge:"required" doc:"the ConfigMap, e.g. coredns"`
	Key       string      `json:"key" kedge:"required" doc:"the key under data, e.g. Corefile"`
	Value     string      `json:"value" kedge:"required" doc:"what the key is to hold (never a secret: a ConfigMap is readable by many)"`
}

// SetConfigMapDataResult says what the key held before. Present is false
// when the cluster has no such ConfigMap: nothing was changed.
type SetConfigMapDataResult struct {
	Present  bool   `json:"present"`
	Previous string `json:"previous"`
	Changed  bool   `json:"changed"`
}

func init() {
	spec.Register(spec.Row{Name: SetConfigMapDataAction, Doc: "set one key of a ConfigMap's data (e.g. CoreDNS's Corefile), applied server-side as field manager kedge-upgrade, the other keys left as they are; a cluster without the ConfigMap is no error (present: false)",
		In: SetConfigMapDataInput{}, Out: SetConfigMapDataResult{}, Timeout: 2 * time.Minute,
		Summary: `set a key of ConfigMap {{.In "name"}}`})
}
