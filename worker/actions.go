package worker

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions"
	etcdapi "kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/activities/assets"
	"kedge.dev/kedge/activities/certinfo"
	"kedge.dev/kedge/activities/check"
	"kedge.dev/kedge/activities/etcd"
	"kedge.dev/kedge/activities/host"
	"kedge.dev/kedge/activities/kube"
	"kedge.dev/kedge/activities/pki"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/activities/vault"
	"kedge.dev/kedge/internal/trust"

	certinfoapi "kedge.dev/kedge/actions/certinfo"
	checkapi "kedge.dev/kedge/actions/check"
	hostapi "kedge.dev/kedge/actions/host"
	kubeapi "kedge.dev/kedge/actions/kube"
	pkiapi "kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/render"
	vaultapi "kedge.dev/kedge/actions/vault"
)

// implementations wires every action of the table to the function that
// implements it. This is the one place where names meet code.
func implementations(h *host.Activities, k *kube.Activities, v *vault.Activities, p *pki.Activities, e *etcd.Activities) map[string]any {
	return map[string]any{
		hostapi.PreflightAction:        h.Preflight,
		hostapi.LayoutAction:           h.Layout,
		hostapi.PullImageAction:        h.PullImage,
		hostapi.PullCRIImagesAction:    h.PullCRIImages,
		hostapi.RunAction:              h.Run,
		hostapi.WriteFileAction:        h.WriteFile,
		hostapi.RestoreFileAction:      h.RestoreFile,
		hostapi.ReadFileAction:         h.ReadFile,
		hostapi.SystemdAction:          h.Systemd,
		hostapi.WriteDropInAction:      h.WriteDropIn,
		hostapi.CertInfoAction:         h.CertInfo,
		hostapi.InstallBundleAction:    h.InstallBundle,
		hostapi.RestoreBundleAction:    h.RestoreBundle,
		hostapi.RestartStaticPodAction: h.RestartStaticPod,
		hostapi.KubeletFilesAction:     h.KubeletFiles,
		hostapi.CheckReadableAction:    h.CheckReadable,
		hostapi.WaitPodTokensAction:    h.WaitPodTokens,
		hostapi.PrepareNodeAction:      h.PrepareNode,

		kubeapi.CordonAction:                 k.Cordon,
		kubeapi.UncordonAction:               k.Uncordon,
		kubeapi.DrainAction:                  k.Drain,
		kubeapi.DeleteNodeAction:             k.DeleteNode,
		kubeapi.DeleteLostNodeAction:         k.DeleteLostNode,
		kubeapi.GetNodeAction:                k.GetNode,
		kubeapi.WaitNodeAction:               k.WaitNode,
		kubeapi.LabelTaintAction:             k.LabelTaint,
		kubeapi.CreateBootstrapTokenAction:   k.CreateBootstrapToken,
		kubeapi.DeleteBootstrapTokenAction:   k.DeleteBootstrapToken,
		kubeapi.BootstrapRBACAction:          k.BootstrapRBAC,
		kubeapi.WaitAPIServerAction:          k.WaitAPIServer,
		kubeapi.ClusterInfoAction:            k.ClusterInfo,
		kubeapi.SaveKubeconfigAction:         k.SaveKubeconfig,
		kubeapi.UpdateKubeconfigAction:       k.UpdateKubeconfig,
		kubeapi.RestartWorkloadsAction:       k.RestartWorkloads,
		kubeapi.LegacyTokensAction:           k.LegacyTokens,
		kubeapi.InstallKubeProxyAction:       k.InstallKubeProxy,
		kubeapi.WaitStaticPodAction:          k.WaitStaticPod,
		kubeapi.CheckServiceAccountKeyAction: k.CheckServiceAccountKey,
		kubeapi.KubeletClientCertAction:      k.KubeletClientCert,
		kubeapi.WaitRootCAAction:             k.WaitRootCA,
		kubeapi.CheckNodesAction:             k.CheckNodes,
		kubeapi.UpgradePlanAction:            k.UpgradePlan,
		kubeapi.KubeletSkewAction:            k.KubeletSkew,
		kubeapi.SetWorkloadImageAction:       k.SetWorkloadImage,
		kubeapi.SetConfigMapDataAction:       k.SetConfigMapData,

		vaultapi.IssueCertAction:  v.IssueCert,
		vaultapi.ReadSecretAction: v.ReadSecret,
		vaultapi.ClusterCAAction:  v.ClusterCA,
		vaultapi.KeyPairAction:    v.KeyPair,
		vaultapi.StageCAAction:    v.StageCA,
		vaultapi.PromoteCAAction:  v.PromoteCA,

		pkiapi.AdoptAction:           p.Adopt,
		pkiapi.RenewAction:           p.RenewInPlace,
		pkiapi.RotateCAAction:        p.RotateCA,
		pkiapi.CheckCALifeAction:     pki.CheckCALife,
		pkiapi.ExportTerraformAction: p.ExportTerraform,

		etcdapi.RemoveMemberAction: e.RemoveMember,
		etcdapi.AddMemberAction:    e.AddMember,
		etcdapi.HealthAction:       e.Health,
		etcdapi.UpgradePlanAction:  e.UpgradePlan,
		etcdapi.SnapshotAction:     e.Snapshot,
		etcdapi.RestoreDrillAction: e.RestoreDrill,

		etcdapi.QuorumLostAction:        e.QuorumLost,
		etcdapi.RestorePlanAction:       e.RestorePlan,
		etcdapi.StopControlPlaneAction:  e.StopControlPlane,
		etcdapi.RestoreMemberAction:     e.RestoreMember,
		etcdapi.StartControlPlaneAction: e.StartControlPlane,

		checkapi.Action:          check.Check,
		certinfoapi.CheckAction:  certinfo.Check,
		certinfoapi.ScanCAAction: certinfo.ScanCA,

		render.KubeconfigAction:    assets.Kubeconfig,
		render.KubeletConfigAction: assets.KubeletConfig,
		render.KubeletUnitAction:   assets.KubeletUnit,
		render.BridgeCNIAction:     assets.BridgeCNI,
		render.StaticPodsAction:    assets.StaticPods,
		render.SetImageAction:      assets.SetImage,
	}
}

// registerActions registers every action of the table on r and returns
// the SSH pool the host actions share.
func registerActions(r registry, opts Options) (*sshpool.Pool, error) {
	va := &vault.Activities{}
	if opts.SSH.Signers == nil {
		opts.SSH.Signers = va.SSHSigners // login certificates from Vault, for inventories that ask
	}
	pool := sshpool.New(opts.SSH)
	hosts := &host.Activities{Pool: pool, HeartbeatInterval: opts.HeartbeatInterval}
	impls := implementations(hosts, &kube.Activities{Logger: opts.Logger}, va,
		&pki.Activities{Hosts: hosts, Vault: va, Lister: hosts, Secrets: va}, etcdActivities(va, opts, hosts, pool))
	if err := register(r, actions.All(), impls); err != nil {
		_ = pool.Close()
		return nil, err
	}
	return pool, nil
}

// etcdActivities are the etcd actions, with the codec keys etcd.snapshot
// seals with when the worker has them, and the backup destinations its
// inventories define.
func etcdActivities(va *vault.Activities, opts Options, hosts *host.Activities, pool *sshpool.Pool) *etcd.Activities {
	e := &etcd.Activities{Vault: va, Destinations: inventoryBackups{opts.Clusters}, Hosts: hosts, Files: pool}
	if opts.SealKeys != nil {
		e.Keys = opts.SealKeys
	}
	return e
}

// inventoryBackups are the backup destinations of the worker's own
// inventories (their backups sections): the only ones a run can name.
type inventoryBackups struct{ clusters trust.Registry }

func (b inventoryBackups) Destination(cluster, name string) (etcdapi.Destination, error) {
	if b.clusters == nil {
		return etcdapi.Destination{}, fmt.Errorf("this worker serves no cluster (--clusters FILE|DIR)")
	}
	c, err := b.clusters.Cluster(cluster)
	if err != nil {
		return etcdapi.Destination{}, err
	}
	return c.Backup(name)
}

type registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// register registers impls under the table's names after checking that
// they are exactly the table's actions and that each takes the action's
// input type and returns its result type: a mismatch is a programming
// error found when the worker starts, not when a run reaches the step.
func register(r registry, table []actions.Action, impls map[string]any) error {
	var problems []string
	for _, a := range table {
		fn, ok := impls[a.Name]
		if !ok {
			problems = append(problems, a.Name+" has no implementation")
			continue
		}
		t := reflect.TypeOf(fn)
		if t.Kind() != reflect.Func || t.NumIn() != 2 || t.NumOut() != 2 || t.In(0) != contextType || t.Out(1) != errorType {
			problems = append(problems, fmt.Sprintf("%s: %s is not func(context.Context, input) (result, error)", a.Name, t))
			continue
		}
		if t.In(1) != a.In || t.Out(0) != a.Out {
			problems = append(problems, fmt.Sprintf("%s: implemented as func(%s) %s, the table says %s -> %s", a.Name, t.In(1), t.Out(0), a.In, a.Out))
		}
	}
	for name := range impls {
		if _, ok := actions.Lookup(name); !ok {
			problems = append(problems, name+" is implemented but not in the action table")
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("kedge worker: the actions do not match their table: %v", problems)
	}
	for _, a := range table {
		r.RegisterActivityWithOptions(impls[a.Name], activity.RegisterOptions{Name: a.Name})
	}
	return nil
}
