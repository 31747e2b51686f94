package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// The actions of a restore from a snapshot after etcd lost its quorum
// (the runbook etcd-restore), in the order it runs them.
const (
	QuorumLostAction        = "etcd.quorum-lost"
	RestorePlanAction       = "etcd.restore-plan"
	StopControlPlaneAction  = "etcd.stop-control-plane"
	RestoreMemberAction     = "etcd.restore-member"
	StartControlPlaneAction = "etcd.start-control-plane"
)

// RestoreJournal is the directory on each controller where a restore
// keeps what it did, one directory per restore token: the manifests it
// moved aside, and which member's data directory it replaced.
const RestoreJournal = "/var/lib/kedge/restore"

// QuorumLostInput names the members to ask, as etcd.health does.
type QuorumLostInput struct {
	Vault     target.Vault `json:"vault"`
	Endpoints []string     `json:"endpoints" kedge:"required" doc:"client URLs of every member, e.g. https://10.0.0.11:2379"`
	CACert    string       `json:"caCert" kedge:"required" doc:"etcd's CA (PEM): the members' certificates must chain to it"`
	Issuer    string       `json:"issuer" kedge:"required" doc:"etcd's CA's Vault issuer: Kedge's client certificate comes from it"`
	// Rollback takes etcd back to a snapshot while it has its quorum
	// (an upgrade undone to what it found): a healthy majority is no
	// refusal.
	Rollback bool `json:"rollback,omitempty" doc:"a restore over a healthy etcd (taking a change back to its snapshot): a healthy majority is no refusal"`
}

// QuorumLostResult is etcd as the members that answer know it: its
// members (as a member last knew them; the endpoints given when none
// answers), the healthy ones, and the quorum they miss.
type QuorumLostResult struct {
	Members []string `json:"members"`
	Healthy []string `json:"healthy"`
	Quorum  int      `json:"quorum"`
}

// RestorePlanInput names the snapshot to restore, as etcd.restore-drill
// does.
type RestorePlanInput struct {
	// Vault names the cluster (the first segment of its snapshots' keys).
	Vault       target.Vault `json:"vault"`
	Destination string       `json:"destination" kedge:"required" doc:"the name of a backup destination the worker's inventory of the cluster defines under backups: (e.g. local, offsite), as etcd.snapshot takes it; never a path or an endpoint"`
	Snapshot    string       `json:"snapshot,omitempty" doc:"the snapshot to restore, by key (CLUSTER/etcd/TIMESTAMP-revN.snap.kseal) or by name; empty or latest: the cluster's newest with a manifest"`
}

// RestorePlanResult is what a restore will bring back, from the
// snapshot's manifest, and the new cluster token every member is
// restored with (made once: a resumed run keeps it).
type RestorePlanResult struct {
	Snapshot   string   `json:"snapshot"`
	Created    string   `json:"created"`
	Age        string   `json:"age"`
	AgeSeconds int64    `json:"ageSeconds"`
	Revision   int64    `json:"revision"`
	Size       int64    `json:"size"`
	Stored     int64    `json:"stored"`
	KeyID      string   `json:"keyId"`
	Members    []string `json:"members"`
	// Token is the restored cluster's new --initial-cluster-token, which
	// also names the restore's journal on each host.
	Token string `json:"token"`
}

// StopControlPlaneInput says how the host runs its API server and etcd
// (host.layout's staticPods and etcd).
type StopControlPlaneInput struct {
	Target            target.SSH `json:"target"`
	Token             string     `json:"token" kedge:"required" doc:"the restore's token (etcd.restore-plan's): its journal on the host is /var/lib/kedge/restore/TOKEN"`
	APIServerManifest string     `json:"apiServerManifest,omitempty" doc:"the kube-apiserver static pod's manifest (host.layout's staticPods), moved aside into the journal; empty: the host runs none"`
	EtcdMode          string     `json:"etcdMode" kedge:"required,enum=static-pod|host-unit" doc:"how the host runs etcd (host.layout's etcd.mode)"`
	EtcdManifest      string     `json:"etcdManifest,omitempty" doc:"etcd's static pod manifest (static-pod), moved aside into the journal"`
	EtcdUnit          string     `json:"etcdUnit,omitempty" doc:"etcd's systemd unit (host-unit), stopped"`
	Wait              string     `json:"wait,omitempty" kedge:"duration" doc:"how long each process may take to go (default 2m)"`
}

// StopControlPlaneResult is what was stopped, in order.
type StopControlPlaneResult struct {
	Stopped []string `json:"stopped"`
}

// StartControlPlaneInput names what to start again: etcd, or the API
// server, as etcd.stop-control-plane stopped them.
type StartControlPlaneInput struct {
	Target    target.SSH `json:"target"`
	Token     string     `json:"token" kedge:"required" doc:"the restore's token: the manifests moved aside are taken back from its journal"`
	Component string     `json:"component" kedge:"required,enum=etcd|kube-apiserver" doc:"what to start: etcd, or the API server"`
	EtcdMode  string     `json:"etcdMode,omitempty" kedge:"enum=static-pod|host-unit" doc:"how the host runs etcd (host.layout's etcd.mode); with component etcd"`
	EtcdUnit  string     `json:"etcdUnit,omitempty" doc:"etcd's systemd unit (host-unit), started without waiting for it (a member waits for its peers)"`
}

// StartControlPlaneResult says what was started; nothing when it ran
// already.
type StartControlPlaneResult struct {
	Started []string `json:"started"`
	// StartedAt is the host's clock (RFC 3339) just before it started
	// them: a kubelet's Lease renewed since reaches the API as it is now
	// (kube.wait-node's leaseAfter).
	StartedAt string `json:"startedAt"`
}

// RestoreMemberInput is one member's restore: the snapshot, the member's
// name and peer URL, the restored cluster's members and token, and its
// data directory on the host.
type RestoreMemberInput struct {
	Target         target.SSH   `json:"target"`
	Vault          target.Vault `json:"vault"`
	Destination    string       `json:"destination" kedge:"required" doc:"the backup destination's name, as etcd.restore-plan took it"`
	Snapshot       string       `json:"snapshot" kedge:"required" doc:"the snapshot's key, as etcd.restore-plan gives it"`
	Token          string       `json:"token" kedge:"required" doc:"the restored cluster's new token (etcd.restore-plan's); a second attempt with it finishes the job and never restores over a member restored already"`
	Name           string       `json:"name" kedge:"required" doc:"the member's name (host.layout's etcd.name)"`
	PeerURL        string       `json:"peerURL" kedge:"required" doc:"the member's peer URL, as in initialCluster"`
	InitialCluster string       `json:"initialCluster" kedge:"required" doc:"every member of the restored cluster, name=peerURL,... (this one included)"`
	DataDir        string       `json:"dataDir" kedge:"required" doc:"etcd's data directory on the host (host.layout's etcd.dataDir), moved aside and kept, never deleted"`
	Owner          string       `json:"owner,omitempty" doc:"uid:gid of the restored data directory when the old one is gone (else the old one's owner and mode are kept); default 0:0"`
}

// RestoreMemberResult is the member restored: its data directory, where
// the old one was kept, and the owner and mode it was given.
type RestoreMemberResult struct {
	// Restored is false when an earlier attempt with the token had
	// already put the restored data directory in place.
	Restored bool   `json:"restored"`
	DataDir  string `json:"dataDir"`
	// Kept is the old data directory, moved aside ("" when there was
	// none): the operator deletes it once the cluster is trusted again.
	Kept  string `json:"kept"`
	Owner string `json:"owner"`
	Mode  string `json:"mode"`
	// Shipped is the restored data directory's size in bytes.
	Shipped int64 `json:"shipped"`
}

func init() {
	spec.Register(spec.Row{Name: QuorumLostAction, Doc: "refuse a restore while etcd can serve: its members listed as a member last knew them, each asked for itself; when a majority answers with a leader and no error, refused, not retried (MajorityHealthy: a restore would throw away what was written since the snapshot); no member answering is a lost quorum",
		In: QuorumLostInput{}, Out: QuorumLostResult{}, Timeout: 2 * time.Minute,
		Summary: `check etcd has lost its quorum`})
}

func init() {
	spec.Register(spec.Row{Name: RestorePlanAction, Doc: "what a restore would bring back, changing nothing: the snapshot named (latest: the cluster's newest with a manifest) in the destination the run names, its manifest checked against its name, the sealed object opened with the codec key the manifest names (its first chunk authenticated); its age, revision, size and key id, and a new cluster token for the restore (made once, kept by a resumed run)",
		In: RestorePlanInput{}, Out: RestorePlanResult{}, Timeout: 5 * time.Minute,
		Summary: `read the {{if eq (.In "snapshot") "" "latest"}}newest etcd snapshot{{else}}etcd snapshot named{{end}} a restore would bring back`})
}

func init() {
	spec.Register(spec.Row{Name: StopControlPlaneAction, Doc: "stop a controller's API server, then its etcd, for a restore: static pod manifests moved aside into the restore's journal (/var/lib/kedge/restore/TOKEN; etcd.start-control-plane puts them back), Typhoon's etcd unit stopped; returns once neither process runs; a second attempt finds the journal and only waits",
		In: StopControlPlaneInput{}, Out: StopControlPlaneResult{}, Timeout: 10 * time.Minute,
		Summary: `stop the API server and etcd{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: RestoreMemberAction, Doc: "restore one member's etcd data directory from a stored snapshot, once per token: streamed through the codec key's seal to a file on the worker (never held whole) and checked as etcd.restore-drill checks it, restored with etcd's own code as the member of the new cluster (its name and peer URL, the initial cluster, the new token), shipped over SFTP beside the data directory and moved into place with the old one's owner and mode; the old one moved aside and kept, never deleted; journaled on the host, so an attempt after a lost worker finishes the job and one that finds the member restored changes nothing",
		In: RestoreMemberInput{}, Out: RestoreMemberResult{}, Timeout: time.Hour,
		Summary: `restore etcd member {{.In "name"}}'s data from the snapshot{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: StartControlPlaneAction, Doc: "start etcd or the API server again after a restore: the manifest etcd.stop-control-plane moved aside put back (copied beside it under a name the kubelet skips, then renamed), or Typhoon's etcd unit started without waiting (a member waits for its peers); a manifest already back is left",
		In: StartControlPlaneInput{}, Out: StartControlPlaneResult{}, Timeout: 5 * time.Minute,
		Summary: `start {{if eq (.In "component") "etcd"}}etcd{{else}}the API server{{end}}{{.On}}`})
}
