package errtype

// Input and state refused before anything changes: not retried.
const (
	// InvalidInput: an input, param or `on:` the action cannot use.
	InvalidInput = "InvalidInput"
	// CheckFailed: a kedge.check condition was false.
	CheckFailed = "CheckFailed"
	// ApprovalRejected: an approver rejected a gate.
	ApprovalRejected = "ApprovalRejected"
	// ApprovalTimeout: no decision came within the gate's timeout.
	ApprovalTimeout = "ApprovalTimeout"
	// UndoFailed: the undo of a failed or aborted run did not complete.
	UndoFailed = "UndoFailed"
	// NodeBusy: another runbook holds the node's lock.
	NodeBusy = "NodeBusy"
	// CredentialRefused: the run named a host, Vault or kubeconfig the
	// worker does not serve.
	CredentialRefused = "CredentialRefused"
	// UnknownLayout: the host runs Kubernetes in a way Kedge does not know.
	UnknownLayout = "UnknownLayout"
	// NodeNameMismatch: the inventory's name is not the kubelet's Node name.
	NodeNameMismatch = "NodeNameMismatch"
	// Unreadable: a process could not read its new files as its own user.
	Unreadable = "Unreadable"
	// NotAdopted: the cluster's CA is not in Vault yet.
	NotAdopted = "NotAdopted"
	// CAWithinRenewalWindow: a CA ends before what it would issue.
	CAWithinRenewalWindow = "CAWithinRenewalWindow"
	// IssuerEnded: Vault's issuer has ended.
	IssuerEnded = "IssuerEnded"
	// ForeignIssuer: a certificate was not issued by the CA Kedge holds.
	ForeignIssuer = "ForeignIssuer"
	// ServiceAccountKeyMismatch: the API server signs with another key.
	ServiceAccountKeyMismatch = "ServiceAccountKeyMismatch"
	// DrainBlocked: a PodDisruptionBudget keeps pods on the node.
	DrainBlocked = "DrainBlocked"
	// EtcdQuorum: removing the member would lose etcd's quorum.
	EtcdQuorum = "EtcdQuorum"
	// EtcdMemberNotLost: a member said to be lost (its host gone) still
	// answers: node-remove takes a live controller out (not retried).
	EtcdMemberNotLost = "EtcdMemberNotLost"
	// EtcdUnhealthy: a member did not answer, has an alarm, or etcd has
	// no leader or not the members expected.
	EtcdUnhealthy = "EtcdUnhealthy"
	// CAStillPresented: an endpoint presents a certificate of a CA that
	// is to be dropped.
	CAStillPresented = "CAStillPresented"
	// NotStaged: no successor was staged at PATH-next to promote.
	NotStaged = "NotStaged"
	// OldKeyInUse: a pod still mounts a service-account token the key to
	// be dropped signed (not retried: the step pauses).
	OldKeyInUse = "OldKeyInUse"
	// UpgradeRefused: an upgrade's plan broke Kubernetes' version skew
	// policy, or a manifest holds a flag the new version removed: nothing
	// was changed (not retried).
	UpgradeRefused = "UpgradeRefused"
	// UpdateUnsupported: the host runs an OS whose update tool Kedge
	// does not drive (os-release names none it knows; not retried).
	UpdateUnsupported = "UpdateUnsupported"
	// HostNotBack: a rebooted host did not answer with a new boot ID in
	// time: it may be down, or the reboot did not happen (not retried: a
	// person looks; the node keeps its place in the wave).
	HostNotBack = "HostNotBack"
	// UpdateDriverActive: another agent drives the host's updates
	// (Zincati, registered as rpm-ostree's update driver), so its tool
	// refused to stage one (not retried: a person chooses FleetLock, a
	// stopped agent, or the bypass).
	UpdateDriverActive = "UpdateDriverActive"
)

// NotRetried returns the types above (refused before anything changes),
// which no retry could change: the NonRetryableErrorTypes of every
// action's RetryPolicy, so the server never retries one even when an
// activity forgot to say so.
func NotRetried() []string {
	return []string{InvalidInput, CheckFailed, ApprovalRejected, ApprovalTimeout, UndoFailed, NodeBusy, CredentialRefused, UnknownLayout, NodeNameMismatch, Unreadable, NotAdopted, CAWithinRenewalWindow, IssuerEnded, ForeignIssuer, ServiceAccountKeyMismatch, DrainBlocked, EtcdQuorum, EtcdMemberNotLost, EtcdUnhealthy, CAStillPresented, NotStaged, OldKeyInUse, UpgradeRefused, UpdateUnsupported, HostNotBack, PrometheusRefused, UpdateDriverActive}
}

// Temporal.
const (
	// AttemptTimeout: an attempt did not end within its step's timeout
	// (the worker ends it a moment before Temporal's start-to-close
	// timeout, so it counts as a failure of the step).
	AttemptTimeout = "AttemptTimeout"
	// RefusedFailure: a worker reported a failure of an activity that its
	// task queue's key did not seal (another site's worker, or no worker
	// of Kedge's): the step runs again, the claim is not read (retried).
	RefusedFailure = "RefusedFailure"
)

// SSH and the host.
const (
	// HostKeyMismatch: the host presented another key (not retried).
	HostKeyMismatch = "HostKeyMismatch"
	// HostUnknown: known_hosts has no key for the host (not retried).
	HostUnknown = "HostUnknown"
	// AuthFailed: the host refused the login (not retried).
	AuthFailed = "AuthFailed"
	// PrivilegeEscalationFailed: the login user cannot sudo -n (not retried).
	PrivilegeEscalationFailed = "PrivilegeEscalationFailed"
	// HostUnreachable: the host could not be dialled (retried).
	HostUnreachable = "HostUnreachable"
	// ConnectionLost: the connection dropped mid-action (retried).
	ConnectionLost = "ConnectionLost"
	// CommandFailed: a command exited non-zero (retried).
	CommandFailed = "CommandFailed"
	// CommandTimeout: a command did not finish in time (retried).
	CommandTimeout = "CommandTimeout"
	// FileNotFound: a file the action reads is not there.
	FileNotFound = "FileNotFound"
	// FileOperationFailed: an SFTP operation failed (retried).
	FileOperationFailed = "FileOperationFailed"
	// UnitFailed: a systemd unit did not settle active.
	UnitFailed = "UnitFailed"
	// NotInEffect: a change was written but the host does not run it.
	NotInEffect = "NotInEffect"
)

// Kubernetes, Vault, etcd and TLS endpoints.
const (
	// KubernetesAPI: the API server failed a request (retried).
	KubernetesAPI = "KubernetesAPI"
	// NodeNotFound: no Node of that name.
	NodeNotFound = "NodeNotFound"
	// NodeNotReady: the Node did not become Ready in time.
	NodeNotReady = "NodeNotReady"
	// CrashLooping: a static pod's container keeps restarting.
	CrashLooping = "CrashLooping"
	// CertificateRequestRefused: a CertificateSigningRequest was denied,
	// or its signer failed it (not retried).
	CertificateRequestRefused = "CertificateRequestRefused"
	// Vault: any other Vault failure (retried).
	Vault = "Vault"
	// VaultDenied: the token may not do this (403; not retried).
	VaultDenied = "VaultDenied"
	// VaultNotFound: nothing at that path (404; not retried).
	VaultNotFound = "VaultNotFound"
	// VaultConflict: Vault already keeps something else there.
	VaultConflict = "VaultConflict"
	// EtcdUnavailable: no etcd member answered (retried).
	EtcdUnavailable = "EtcdUnavailable"
	// EtcdSnapshotCorrupt: a snapshot etcd sent failed its own check
	// (its trailing sha256 or its size) and was not stored (retried).
	EtcdSnapshotCorrupt = "EtcdSnapshotCorrupt"
	// ObjectStore: the snapshot destination failed a write, list or
	// delete (retried).
	ObjectStore = "ObjectStore"
	// ObjectStoreDenied: the destination refused the credentials or the
	// access (not retried).
	ObjectStoreDenied = "ObjectStoreDenied"
	// NoSealKey: the worker has no codec key to seal a backup with (not
	// retried).
	NoSealKey = "NoSealKey"
	// EtcdSnapshotInvalid: a stored snapshot failed a check before it was
	// restored: its seal (changed, cut short, or sealed with a key the
	// worker does not hold), its manifest, its size or sha256 against the
	// manifest, or etcd's own trailing sha256 (not retried).
	EtcdSnapshotInvalid = "EtcdSnapshotInvalid"
	// EtcdDrillFailed: a restore drill found no snapshot to restore, or
	// the restored etcd lacks a key expected or the manifest's revision
	// (not retried); or the snapshot did not restore or its etcd did not
	// start (retried).
	EtcdDrillFailed = "EtcdDrillFailed"
	// EtcdMajorityHealthy: a restore was refused because a majority of
	// etcd's members answers healthy (its quorum is not lost; not
	// retried).
	EtcdMajorityHealthy = "EtcdMajorityHealthy"
	// EtcdRestoreFailed: a restore found no snapshot, or etcd's own
	// restore refused it (not retried); or a host step failed: a process
	// that would not stop, a data directory that could not be shipped or
	// moved (retried; the restore's journal on the host lets the next
	// attempt go on).
	EtcdRestoreFailed = "EtcdRestoreFailed"
	// EndpointUnreachable: a TLS endpoint could not be reached (retried).
	EndpointUnreachable = "EndpointUnreachable"
	// CertificateUntrusted: the endpoint's certificate does not verify.
	CertificateUntrusted = "CertificateUntrusted"
	// CertificateNotRenewed: the endpoint still serves the old certificate.
	CertificateNotRenewed = "CertificateNotRenewed"
	// CertificateExpiring: an endpoint presents a certificate that ends
	// within the window a change needs (not retried).
	CertificateExpiring = "CertificateExpiring"
	// DiskFull: a host's file system has less free space than the action
	// needs before it starts (not retried).
	DiskFull = "DiskFull"
	// PrometheusUnreachable: Prometheus could not be reached, did not
	// answer in time, or failed the query with a 5xx (retried).
	PrometheusUnreachable = "PrometheusUnreachable"
	// PrometheusRefused: the server refused the query (a 4xx), or its
	// answer is not Prometheus's alerts API (not retried: the URL names
	// something else).
	PrometheusRefused = "PrometheusRefused"
)
