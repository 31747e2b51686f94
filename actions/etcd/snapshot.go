package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// SnapshotAction is the action name of Snapshot.
const SnapshotAction = "etcd.snapshot"

// Destination kinds.
const (
	DestinationLocal = "local"
	DestinationS3    = "s3"
)

// SnapshotInput names the members to ask, as etcd.health does, where the
// sealed snapshot goes, and how many to keep.
type SnapshotInput struct {
	Vault     target.Vault `json:"vault"`
	Endpoints []string     `json:"endpoints" kedge:"required" doc:"client URLs of members to ask, e.g. https://10.0.0.11:2379 (any one lists the members; each answers for itself)"`
	CACert    string       `json:"caCert" kedge:"required" doc:"etcd's CA (PEM): the members' certificates must chain to it"`
	Issuer    string       `json:"issuer" kedge:"required" doc:"etcd's CA's Vault issuer: Kedge's client certificate comes from it"`
	// Member, when set, is the member to take the snapshot from; it must
	// be healthy. Empty: a healthy follower, else the leader.
	Member string `json:"member,omitempty" doc:"the member to take the snapshot from, by name (refused unless it is a healthy voting member); default: a healthy follower, else the leader"`
	// Destination names where the sealed snapshot goes: one of the
	// destinations the worker's own inventory of the cluster defines
	// under backups. A run names one; what it is (a directory, an S3
	// endpoint, credentials) only the worker's operator says.
	Destination string `json:"destination" kedge:"required" doc:"the name of a backup destination the worker's inventory of the cluster defines under backups: (e.g. local, offsite); never a path or an endpoint"`
	// KeepLast and KeepFor are the retention: after the upload, the
	// cluster's older snapshots that neither keeps are deleted (never
	// the one just written). Neither set: every snapshot is kept.
	KeepLast int    `json:"keepLast,omitempty" doc:"keep the newest N snapshots of the cluster (with keepFor: those it keeps too); 0: no count"`
	KeepFor  string `json:"keepFor,omitempty" kedge:"duration" doc:"keep the snapshots younger than this, e.g. 168h (with keepLast: those it keeps too); empty: no age"`
}

// Destination is where snapshots are kept, as an inventory's backups
// section defines it: a directory on the worker or an S3-compatible
// bucket. Objects are named
// CLUSTER/etcd/TIMESTAMP-revREVISION.snap.kseal, each with its manifest
// (.json) beside it.
type Destination struct {
	Kind string `json:"kind"` // DestinationLocal or DestinationS3
	// Path is the local directory, absolute, on the worker.
	Path string `json:"path,omitempty"`
	// Endpoint is the S3 server's URL, https://HOST[:PORT] (http://
	// only with Insecure).
	Endpoint string `json:"endpoint,omitempty"`
	Bucket   string `json:"bucket,omitempty"`
	Region   string `json:"region,omitempty"`
	// Insecure allows an http:// endpoint (a test world's server).
	Insecure bool `json:"insecure,omitempty"`
	// CredentialsFile is a file on the worker, readable by its owner
	// only, with the access key and secret:
	//	aws_access_key_id = ...
	//	aws_secret_access_key = ...
	// (an AWS shared credentials file's [default] profile).
	CredentialsFile string `json:"credentialsFile,omitempty"`
	// CAFile, when set, is the CA (PEM) that verifies the endpoint's
	// certificate instead of the system's roots.
	CAFile string `json:"caFile,omitempty"`
}

// SnapshotResult is what was stored, and what retention deleted.
type SnapshotResult struct {
	// Key is the sealed snapshot's object key, Manifest its manifest's.
	Key      string `json:"key"`
	Manifest string `json:"manifest"`
	// Member is the member the snapshot came from.
	Member string `json:"member"`
	// Revision is the revision the member reported right before the
	// snapshot: the snapshot holds it (or a later one).
	Revision int64 `json:"revision"`
	// Size and SHA256 are the snapshot's as etcd sent it (plaintext, its
	// own trailing sha256 included), Stored the sealed object's size.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Stored int64  `json:"stored"`
	// KeyID is the id of the codec key that sealed it.
	KeyID string `json:"keyId"`
	// Members are etcd's members, by name.
	Members []string `json:"members"`
	// Created is when the snapshot was taken (RFC 3339, UTC).
	Created string `json:"created"`
	// Deleted are the older snapshots retention deleted, by key.
	Deleted []string `json:"deleted"`
}

// Manifest is the JSON object stored beside each snapshot: what a
// restore checks before it trusts one. It holds no secret.
type Manifest struct {
	Cluster        string   `json:"cluster"`
	Member         string   `json:"member"`
	Members        []string `json:"members"`
	Revision       int64    `json:"revision"`
	Size           int64    `json:"size"`
	SHA256         string   `json:"sha256"`
	KeyID          string   `json:"keyId"`
	Created        string   `json:"created"`
	Object         string   `json:"object"`
	StorageVersion string   `json:"storageVersion,omitempty"`
}

func init() {
	spec.Register(spec.Row{Name: SnapshotAction, Doc: "take a snapshot of etcd from a healthy voting member through its API (a 10-minute client certificate from etcd's CA in Vault), checked against etcd's own sha256 and size as it streams, sealed with the codec key on the worker (never held whole, never stored in the clear) and stored with a manifest in the destination the run names: one the worker's inventory of the cluster defines under backups: (a directory on the worker or an S3 bucket), any other name refused, not retried, before anything is written; then delete the cluster's older snapshots that neither keepLast nor keepFor keeps; refused, not retried, when the member asked for is not a healthy started voting member or none is; a snapshot that fails etcd's check is not stored (retried)",
		In: SnapshotInput{}, Out: SnapshotResult{}, Timeout: time.Hour,
		Summary: `take a sealed etcd snapshot{{with .In "member"}} from {{.}}{{end}} into {{.In "destination"}}`})
}
