package catalog

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/activities/assets"
	"kedge.dev/kedge/activities/certinfo"
	"kedge.dev/kedge/activities/check"
	"kedge.dev/kedge/activities/etcd"
	"kedge.dev/kedge/activities/host"
	"kedge.dev/kedge/activities/kube"
	"kedge.dev/kedge/activities/pki"
	"kedge.dev/kedge/activities/render"
	"kedge.dev/kedge/activities/vault"
)

// TargetKind says what a step running the action is aimed at.
type TargetKind string

const (
	// TargetNone: the action needs no `on:`.
	TargetNone TargetKind = ""
	// TargetHost: the step's `on:` names the host (or hosts) to run on.
	TargetHost TargetKind = "host"
	// TargetNode: the step's `on:` names the Kubernetes node(s) to act on,
	// through the API server the inventory's `kubernetes:` names.
	TargetNode TargetKind = "node"
	// TargetCluster: the action works on the cluster's API server as a
	// whole (no `on:`); the workflow gives it the inventory's kubernetes
	// section.
	TargetCluster TargetKind = "cluster"
)

// NeedsOn says whether a step running the action must name nodes or hosts
// with `on:`.
func (t TargetKind) NeedsOn() bool { return t == TargetHost || t == TargetNode }

// Input types, as the validator checks literal values.
const (
	TypeString   = "string"
	TypeInt      = "int"
	TypeBool     = "bool"
	TypeList     = "list"
	TypeMap      = "map"
	TypeDuration = "duration"
	TypeMode     = "mode"
	TypeObject   = "object"
)

// Input is one input of an action.
type Input struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	// Shell is set for shell text (host.run's command and script): it is
	// literal text, no expression in it, not even the whole value (the
	// run-command runbook's one param passed through whole aside).
	Shell bool   `json:"shell,omitempty"`
	Elem  string `json:"elem,omitempty"` // item type of a list
	Doc   string `json:"doc,omitempty"`
}

// Action describes one action.
type Action struct {
	Name    string     `json:"name"`
	Doc     string     `json:"doc"`
	Target  TargetKind `json:"target,omitempty"`
	Inputs  []Input    `json:"inputs"`
	Outputs []string   `json:"outputs"`
	// OneOf lists groups of inputs of which exactly one must be given.
	OneOf [][]string `json:"oneOf,omitempty"`
	// Timeout is the default start-to-close timeout of one attempt.
	Timeout time.Duration `json:"timeout"`
	// Heartbeat is the heartbeat timeout: a worker that dies mid-attempt is
	// noticed after this long.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Vault is set for actions that reach the cluster's Vault: the
	// workflow gives them the inventory's vault section.
	Vault bool `json:"vault,omitempty"`
}

// Input returns the named input.
func (a Action) Input(name string) (Input, bool) {
	for _, in := range a.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return Input{}, false
}

var actions = []Action{
	describe(host.PreflightAction, "check that the host is reachable and that host actions run there as root (sudo -n when the inventory says become: sudo); fails before anything changes", host.PreflightInput{}, host.PreflightResult{}, 2*time.Minute, 15*time.Second, nil),
	describe(host.LayoutAction, "read how the host runs Kubernetes: its layout (kedge, typhoon-flatcar, typhoon-fcos, none, unknown), the kubelet's unit, drop-ins, image and files, etcd's mode and members, the cluster DNS, the CA and key files; with require, refuse any other layout before anything changes", host.LayoutInput{}, host.LayoutResult{}, 2*time.Minute, 15*time.Second, nil),
	describe(host.PullImageAction, "pull an image with the host's container runtime (docker or podman) and, with kubeletVersion, read the kubelet version it holds (its entrypoint run with --version)", host.PullImageInput{}, host.PullImageResult{}, 15*time.Minute, 30*time.Second, nil),
	describe(host.RunAction, "run a command or script on the host", host.RunInput{}, host.RunResult{}, 10*time.Minute, 15*time.Second, []string{"command", "script"}),
	describe(host.WriteFileAction, "write a file atomically (temp file + rename), keeping the previous content for undo", host.WriteFileInput{}, host.WriteFileResult{}, 5*time.Minute, 15*time.Second, []string{"content", "contentBase64"}),
	describe(host.WriteDropInAction, "render a systemd drop-in setting environment variables (e.g. KUBELET_IMAGE) and write it like host.write-file", host.WriteDropInInput{}, host.WriteFileResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(host.InstallBundleAction, "install a set of files all or none: shipped as one bundle, staged beside their targets, then renamed into place", host.InstallBundleInput{}, host.InstallBundleResult{}, 10*time.Minute, 15*time.Second, nil),
	describe(host.RestoreBundleAction, "undo a host.install-bundle: restore the replaced files, remove the created ones", host.RestoreBundleInput{}, host.RestoreBundleResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(host.CertInfoAction, "read certificate files (PEM or kubeconfigs) on the host: when each ends, whether it is due for renewal", host.CertInfoInput{}, host.CertInfoResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(certinfo.CheckAction, "connect to a TLS endpoint and report the certificate it serves (and whether it is due for renewal); optionally wait until it serves a newer one", certinfo.CheckInput{}, certinfo.CheckResult{}, 10*time.Minute, 30*time.Second, nil),
	describe(host.RestoreFileAction, "undo a host.write-file: put the previous content back or remove the file", host.RestoreFileInput{}, host.RestoreFileResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(host.RestartStaticPodAction, "make the kubelet restart a static pod: set the kedge.dev/restarted-at annotation in its manifest (nothing else changes; undo with host.restore-file)", host.RestartStaticPodInput{}, host.RestartStaticPodResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(host.KubeletFilesAction, "read how a worker runs its kubelet (unit, drop-ins, kubelet.path, KubeletConfiguration; never a credential) and what its host has for it (Typhoon's containerd configuration, kernel modules, sysctls, the units the kubelet requires), and give the files back made for another node: its --hostname-override and --node-ip, its own labels and taints instead of the worker's, anything else naming the worker refused with file and line", host.KubeletFilesInput{}, host.KubeletFilesResult{}, 2*time.Minute, 15*time.Second, nil),
	describe(host.PrepareNodeAction, "ready a host for its kubelet: load kernel modules, apply sysctl files, daemon-reload, enable units, start (or restart) units and check they run; a failure takes back the units it enabled or started; with stop and disable, its undo", host.PrepareNodeInput{}, host.PrepareNodeResult{}, 10*time.Minute, 15*time.Second, nil),
	describe(host.ReadFileAction, "read a file from the host", host.ReadFileInput{}, host.ReadFileResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(host.CheckReadableAction, "check each process can read its files as the user it runs as (opened under its uid, gid and groups with setpriv): before a restart, so a process that could not read its new files is never restarted onto them; fails naming the file, its owner and mode, the process and its uid", host.CheckReadableInput{}, host.CheckReadableResult{}, 2*time.Minute, 15*time.Second, nil),
	describe(check.Action, "stop the runbook when a condition is false (a guard)", check.Input{}, check.Result{}, time.Minute, 0, nil),
	describe(kube.CordonAction, "mark the node unschedulable", kube.NodeInput{}, kube.NodeResult{}, 30*time.Second, 0, nil),
	describe(kube.UncordonAction, "mark the node schedulable again", kube.NodeInput{}, kube.NodeResult{}, 30*time.Second, 0, nil),
	describe(kube.DrainAction, "cordon the node and evict its pods, respecting PodDisruptionBudgets (DaemonSet pods stay)", kube.DrainInput{}, kube.DrainResult{}, 30*time.Minute, 30*time.Second, nil),
	describe(kube.DeleteNodeAction, "delete the Node object", kube.NodeInput{}, kube.NodeResult{}, 30*time.Second, 0, nil),
	describe(kube.GetNodeAction, "read the Node: whether it exists, is Ready and schedulable, its kubelet version (a missing Node is not an error)", kube.NodeInput{}, kube.GetNodeResult{}, 30*time.Second, 0, nil),
	describe(kube.WaitNodeAction, "wait until the node is Ready (and, optionally, runs the expected kubelet version)", kube.WaitNodeInput{}, kube.WaitNodeResult{}, 30*time.Minute, 30*time.Second, nil),
	describe(kube.LabelTaintAction, "set labels and add taints on the node", kube.LabelTaintInput{}, kube.NodeResult{}, 30*time.Second, 0, nil),
	describe(kube.CreateBootstrapTokenAction, "mint a short-lived bootstrap token (a Secret in kube-system) for one kubelet TLS bootstrap", kube.CreateBootstrapTokenInput{}, kube.BootstrapTokenResult{}, 30*time.Second, 0, nil),
	describe(kube.DeleteBootstrapTokenAction, "revoke a bootstrap token (delete its Secret); a token already gone is fine", kube.DeleteBootstrapTokenInput{}, kube.ChangedResult{}, 30*time.Second, 0, nil),
	describe(kube.BootstrapRBACAction, "bind the TLS bootstrap roles: joining kubelets may request client certificates, which are approved automatically", kube.BootstrapRBACInput{}, kube.ChangedResult{}, 30*time.Second, 0, nil),
	describe(kube.WaitAPIServerAction, "wait until the API server answers /readyz", kube.WaitAPIServerInput{}, kube.WaitAPIServerResult{}, 30*time.Minute, 30*time.Second, nil),
	describe(kube.ClusterInfoAction, "the API server URL and CA bundle of the inventory's kubeconfig", kube.ClusterInfoInput{}, kube.ClusterInfoResult{}, 30*time.Second, 0, nil),
	describe(kube.InstallKubeProxyAction, "install or update kube-proxy (iptables mode, a DaemonSet on every node), applied server-side", kube.InstallKubeProxyInput{}, kube.ChangedResult{}, 2*time.Minute, 0, nil),
	describe(kube.WaitStaticPodAction, "wait until the node's kubelet runs a static pod with every container ready (its mirror pod); with restartedAt, the pod of that host.restart-static-pod", kube.WaitStaticPodInput{}, kube.WaitStaticPodResult{}, 10*time.Minute, 30*time.Second, nil),
	describe(kube.CheckServiceAccountKeyAction, "check the API server signs service-account tokens with this key: a 10-minute token is requested and its signature verified (fails with ServiceAccountKeyMismatch otherwise)", kube.CheckServiceAccountKeyInput{}, kube.CheckServiceAccountKeyResult{}, 30*time.Second, 0, nil),
	describe(kube.SaveKubeconfigAction, "write a kubeconfig where the inventory's kubernetes.kubeconfig names it, on the worker (mode 0600)", kube.SaveKubeconfigInput{}, kube.ChangedResult{}, 30*time.Second, 0, nil),
	describe(assets.KubeconfigAction, "render a kubeconfig (CA and a token or client certificate embedded)", render.KubeconfigInput{}, assets.FileResult{}, 30*time.Second, 0, nil),
	describe(assets.KubeletConfigAction, "render the kubelet's KubeletConfiguration file", render.KubeletConfigInput{}, assets.FileResult{}, 30*time.Second, 0, nil),
	describe(assets.KubeletUnitAction, "render kubelet.service: the kubelet run as a container of ${KUBELET_IMAGE}", render.KubeletUnitInput{}, assets.FileResult{}, 30*time.Second, 0, nil),
	describe(assets.BridgeCNIAction, "render a node's CNI network: a bridge with addresses from the node's share of the pod network", render.BridgeCNIInput{}, assets.FileResult{}, 30*time.Second, 0, nil),
	describe(assets.StaticPodsAction, "render the control plane's static pod manifests (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)", render.ControlPlaneInput{}, assets.StaticPodsResult{}, 30*time.Second, 0, nil),
	describe(vault.IssueCertAction, "issue a certificate and private key from the cluster's Vault PKI (the key stays sealed in Temporal)", vault.IssueCertInput{}, vault.IssueCertResult{}, time.Minute, 0, nil),
	describe(vault.ClusterCAAction, "one of the cluster's CAs from Vault, made on first use (an intermediate under the PKI root; its key kept in KV, or never out of Vault with keyInVault: etcd's CA)", vault.ClusterCAInput{}, vault.ClusterCAResult{}, time.Minute, 0, nil),
	describe(vault.KeyPairAction, "an ECDSA key pair kept in Vault KV, made on first use (e.g. the service-account signing key)", vault.KeyPairInput{}, vault.KeyPairResult{}, time.Minute, 0, nil),
	describe(vault.ReadSecretAction, "read a KV v2 secret from the cluster's Vault", vault.ReadSecretInput{}, vault.ReadSecretResult{}, time.Minute, 0, nil),
	describe(pki.AdoptAction, "take a running cluster's trust into Vault from a controller: its CA and key (a PKI issuer, where vault.cluster-ca looks), etcd's CA (its key given, kept in Vault only) and the service-account key pair (where vault.key-pair looks); never replaces what Vault already keeps", pki.AdoptInput{}, pki.AdoptResult{}, 2*time.Minute, 15*time.Second, nil),
	describe(pki.RenewAction, "renew a controller's certificates where its layout keeps them, each from the CA that issued it, same subject and SANs, new keys, installed all or none (undo with host.restore-bundle); keys pass only from the worker to the host", pki.RenewInput{}, pki.RenewResult{}, 5*time.Minute, 15*time.Second, nil),
	describe(pki.CheckCALifeAction, "refuse a renewal whose CA ends within its window (threshold): what is renewed from that CA cannot outlive it; fails before anything changes, naming the CA, when it ends and the CA rotation runbook (ca-rotation) to run first", pki.CheckCALifeInput{}, pki.CheckCALifeResult{}, 30*time.Second, 0, nil),
	describe(etcd.RemoveMemberAction, "remove a member from etcd through its API (a 10-minute client certificate from etcd's CA in Vault), refusing when the members left would be none or their healthy ones short of a quorum; a member already gone is success", etcd.RemoveMemberInput{}, etcd.RemoveMemberResult{}, 2*time.Minute, 0, nil),
	describe(host.SystemdAction, "daemon-reload, enable/disable, start/stop/restart a systemd unit and wait until it settles", host.SystemdInput{}, host.SystemdResult{}, 10*time.Minute, 15*time.Second, nil),
}

// Lookup finds an action by name.
func Lookup(name string) (Action, bool) {
	i := slices.IndexFunc(actions, func(a Action) bool { return a.Name == name })
	if i < 0 {
		return Action{}, false
	}
	return actions[i], true
}

// All returns every action, sorted by name.
func All() []Action {
	out := slices.Clone(actions)
	slices.SortFunc(out, func(a, b Action) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns every action name, sorted.
func Names() []string {
	var names []string
	for _, a := range All() {
		names = append(names, a.Name)
	}
	return names
}

func describe(name, doc string, in, out any, timeout, heartbeat time.Duration, oneOf []string) Action {
	a := Action{Name: name, Doc: doc, Timeout: timeout, Heartbeat: heartbeat}
	if oneOf != nil {
		a.OneOf = [][]string{oneOf}
	}
	t := reflect.TypeOf(in)
	_, onCluster := t.FieldByName("Cluster") // then "node" is the target, not an input
	for i := range t.NumField() {
		f := t.Field(i)
		jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch jsonName {
		case "target":
			a.Target = TargetHost
			continue
		case "cluster":
			if a.Target != TargetNode {
				a.Target = TargetCluster
			}
			continue
		case "node":
			if onCluster {
				a.Target = TargetNode
				continue
			}
		case "vault":
			a.Vault = true
			continue
		}
		if jsonName == "" || jsonName == "-" {
			continue
		}
		input := Input{Name: jsonName, Type: goType(f.Type), Doc: f.Tag.Get("doc")}
		if input.Type == TypeList {
			input.Elem = goType(f.Type.Elem())
		}
		for _, opt := range strings.Split(f.Tag.Get("kedge"), ",") {
			switch {
			case opt == "required":
				input.Required = true
			case opt == "duration":
				input.Type = TypeDuration
			case opt == "mode":
				input.Type = TypeMode
			case opt == "shell":
				input.Shell = true
			case strings.HasPrefix(opt, "enum="):
				input.Enum = strings.Split(strings.TrimPrefix(opt, "enum="), "|")
			}
		}
		a.Inputs = append(a.Inputs, input)
	}
	rt := reflect.TypeOf(out)
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			a.Outputs = append(a.Outputs, name)
		}
	}
	return a
}

func goType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return TypeString
	case reflect.Int, reflect.Int32, reflect.Int64:
		return TypeInt
	case reflect.Bool:
		return TypeBool
	case reflect.Slice:
		return TypeList
	case reflect.Map:
		// A map of strings; a map of anything else is an object (the
		// values keep their shape).
		if t.Elem().Kind() == reflect.String {
			return TypeMap
		}
	}
	return TypeObject
}
