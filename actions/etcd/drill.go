package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// RestoreDrillAction is the action name of RestoreDrill.
const RestoreDrillAction = "etcd.restore-drill"

// RestoreDrillInput names the cluster and the destination of its
// snapshots, as etcd.snapshot takes them, the snapshot (default: the
// newest) and what the restored etcd must hold. The drill works in a
// directory of its own under the worker's $TMPDIR (it needs twice the
// snapshot's size free there).
type RestoreDrillInput struct {
	// Vault names the cluster, as etcd.snapshot's does: its name is the
	// first segment of the snapshots' keys. The drill asks nothing of
	// Vault; the workflow fills the cluster from the run's inventory, so
	// a run drills its own cluster's snapshots only.
	Vault target.Vault `json:"vault"`
	// Destination names where the sealed snapshots are, as etcd.snapshot
	// takes it: one of the destinations the worker's inventory of the
	// cluster defines under backups.
	Destination string `json:"destination" kedge:"required" doc:"the name of a backup destination the worker's inventory of the cluster defines under backups: (e.g. local, offsite), as etcd.snapshot takes it; never a path or an endpoint"`
	// Snapshot, when set, is the snapshot to restore: its object key or
	// its name under CLUSTER/etcd/. Empty: the newest with a manifest.
	Snapshot string `json:"snapshot,omitempty" doc:"the snapshot to restore, by key (CLUSTER/etcd/TIMESTAMP-revN.snap.kseal) or by name; default: the cluster's newest"`
	// ExpectKeys are exact etcd keys the restored etcd must hold.
	ExpectKeys []string `json:"expectKeys,omitempty" doc:"exact etcd keys the restored etcd must hold, e.g. /registry/secrets/default/drill-canary (printable, at most 1024 bytes each, at most 100); one missing fails the drill"`
}

// RestoreDrillResult is the snapshot restored and what the restored etcd
// held. A drill that fails on a missing key or revision carries this
// result in its failure's details.
type RestoreDrillResult struct {
	// Snapshot is the restored snapshot's object key.
	Snapshot string `json:"snapshot"`
	// Created is when the snapshot was taken (RFC 3339, UTC); Age and
	// AgeSeconds how long before the drill.
	Created    string `json:"created"`
	Age        string `json:"age"`
	AgeSeconds int64  `json:"ageSeconds"`
	// Size is the snapshot's plaintext size, Stored the sealed object's.
	Size   int64 `json:"size"`
	Stored int64 `json:"stored"`
	// KeyID is the codec key it was sealed with.
	KeyID string `json:"keyId"`
	// ManifestRevision is the revision the manifest records; Revision
	// the one the restored etcd answered with (never lower).
	ManifestRevision int64 `json:"manifestRevision"`
	Revision         int64 `json:"revision"`
	// Keys is how many keys the restored etcd holds.
	Keys int64 `json:"keys"`
	// Found and Missing are the expected keys it holds and lacks.
	Found   []string `json:"found"`
	Missing []string `json:"missing"`
	// FetchMillis is the time to read, open and check the snapshot;
	// RestoreMillis the time to restore it and have its etcd answer.
	FetchMillis   int64 `json:"fetchMillis"`
	RestoreMillis int64 `json:"restoreMillis"`
}

func init() {
	spec.Register(spec.Row{Name: RestoreDrillAction, Doc: "restore a stored etcd snapshot (the cluster's newest with a manifest, or the one named) from the destination the run names (one the worker's inventory defines under backups:) into a throwaway etcd on the worker and check it: streamed through the codec key's seal to a 0600 file in a directory of its own (never held whole), checked against its manifest's size, sha256 and key id and etcd's own trailing sha256, restored with etcd's own code and started as one member on loopback (random ports, TLS from a CA made for the drill); it must answer at the manifest's revision or later and hold every key expected; then stopped and its directory removed, even on failure. A tampered snapshot is refused before etcd starts; a missing key fails the drill naming it (neither retried)",
		In: RestoreDrillInput{}, Out: RestoreDrillResult{}, Timeout: time.Hour,
		Summary: `restore {{if .In "snapshot"}}the etcd snapshot named{{else}}the newest etcd snapshot{{end}} into a throwaway etcd and check it`})
}
