package worker

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/activities/assets"
	"kedge.dev/kedge/activities/etcdapi"
	"kedge.dev/kedge/activities/guard"
	"kedge.dev/kedge/activities/kubeapi"
	"kedge.dev/kedge/activities/pkihost"
	"kedge.dev/kedge/activities/promapi"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/activities/tlsprobe"
	"kedge.dev/kedge/activities/vaultapi"
	"kedge.dev/kedge/worker/trust"

	"kedge.dev/kedge/actions/certinfo"
	"kedge.dev/kedge/actions/check"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/prometheus"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/actions/vault"
)

// implementations wires every action of the table to the function that
// implements it. This is the one place where names meet code.
func implementations(h *sshhost.Activities, k *kubeapi.Activities, v *vaultapi.Activities, p *pkihost.Activities, e *etcdapi.Activities, pr *promapi.Activities) map[string]any {
	return map[string]any{
		host.PreflightAction:        h.Preflight,
		host.LayoutAction:           h.Layout,
		host.PullImageAction:        h.PullImage,
		host.PullCRIImagesAction:    h.PullCRIImages,
		host.RunAction:              h.Run,
		host.WriteFileAction:        h.WriteFile,
		host.RestoreFileAction:      h.RestoreFile,
		host.ReadFileAction:         h.ReadFile,
		host.SystemdAction:          h.Systemd,
		host.WriteDropInAction:      h.WriteDropIn,
		host.CertInfoAction:         h.CertInfo,
		host.InstallBundleAction:    h.InstallBundle,
		host.RestoreBundleAction:    h.RestoreBundle,
		host.RestartStaticPodAction: h.RestartStaticPod,
		host.KubeletFilesAction:     h.KubeletFiles,
		host.CheckReadableAction:    h.CheckReadable,
		host.WaitPodTokensAction:    h.WaitPodTokens,
		host.PrepareNodeAction:      h.PrepareNode,
		host.BootInfoAction:         h.BootInfo,
		host.OSUpdateAction:         h.OSUpdate,
		host.RebootAction:           h.Reboot,

		kube.CordonAction:                 k.Cordon,
		kube.UncordonAction:               k.Uncordon,
		kube.DrainAction:                  k.Drain,
		kube.DeleteNodeAction:             k.DeleteNode,
		kube.DeleteLostNodeAction:         k.DeleteLostNode,
		kube.GetNodeAction:                k.GetNode,
		kube.WaitNodeAction:               k.WaitNode,
		kube.LabelTaintAction:             k.LabelTaint,
		kube.CreateBootstrapTokenAction:   k.CreateBootstrapToken,
		kube.DeleteBootstrapTokenAction:   k.DeleteBootstrapToken,
		kube.BootstrapRBACAction:          k.BootstrapRBAC,
		kube.WaitAPIServerAction:          k.WaitAPIServer,
		kube.ClusterInfoAction:            k.ClusterInfo,
		kube.SaveKubeconfigAction:         k.SaveKubeconfig,
		kube.UpdateKubeconfigAction:       k.UpdateKubeconfig,
		kube.RestartWorkloadsAction:       k.RestartWorkloads,
		kube.LegacyTokensAction:           k.LegacyTokens,
		kube.InstallKubeProxyAction:       k.InstallKubeProxy,
		kube.WaitStaticPodAction:          k.WaitStaticPod,
		kube.CheckServiceAccountKeyAction: k.CheckServiceAccountKey,
		kube.KubeletClientCertAction:      k.KubeletClientCert,
		kube.WaitRootCAAction:             k.WaitRootCA,
		kube.CheckNodesAction:             k.CheckNodes,
		kube.UpgradePlanAction:            k.UpgradePlan,
		kube.KubeletSkewAction:            k.KubeletSkew,
		kube.SetWorkloadImageAction:       k.SetWorkloadImage,
		kube.SetConfigMapDataAction:       k.SetConfigMapData,

		vault.IssueCertAction:  v.IssueCert,
		vault.ReadSecretAction: v.ReadSecret,
		vault.ClusterCAAction:  v.ClusterCA,
		vault.KeyPairAction:    v.KeyPair,
		vault.StageCAAction:    v.StageCA,
		vault.PromoteCAAction:  v.PromoteCA,

		pki.AdoptAction:           p.Adopt,
		pki.RenewAction:           p.RenewInPlace,
		pki.RotateCAAction:        p.RotateCA,
		pki.CheckCALifeAction:     pkihost.CheckCALife,
		pki.ExportTerraformAction: p.ExportTerraform,

		etcd.RemoveMemberAction: e.RemoveMember,
		etcd.AddMemberAction:    e.AddMember,
		etcd.HealthAction:       e.Health,
		etcd.UpgradePlanAction:  e.UpgradePlan,
		etcd.SnapshotAction:     e.Snapshot,
		etcd.RestoreDrillAction: e.RestoreDrill,

		etcd.QuorumLostAction:        e.QuorumLost,
		etcd.RestorePlanAction:       e.RestorePlan,
		etcd.StopControlPlaneAction:  e.StopControlPlane,
		etcd.RestoreMemberAction:     e.RestoreMember,
		etcd.StartControlPlaneAction: e.StartControlPlane,

		prometheus.AlertsAction: pr.Alerts,

		check.Action:          guard.Check,
		certinfo.CheckAction:  tlsprobe.Check,
		certinfo.ScanCAAction: tlsprobe.ScanCA,

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
	va := &vaultapi.Activities{}
	if opts.SSH.Signers == nil {
		opts.SSH.Signers = va.SSHSigners // login certificates from Vault, for inventories that ask
	}
	pool := sshpool.New(opts.SSH)
	hosts := &sshhost.Activities{Pool: pool, HeartbeatInterval: opts.HeartbeatInterval}
	impls := implementations(hosts, &kubeapi.Activities{Logger: opts.Logger}, va,
		&pkihost.Activities{Hosts: hosts, Vault: va, Lister: hosts, Secrets: va}, etcdActivities(va, opts, hosts, pool), &promapi.Activities{})
	if err := register(r, actions.All(), impls); err != nil {
		_ = pool.Close()
		return nil, err
	}
	return pool, nil
}

// etcdActivities are the etcd actions, with the codec keys etcd.snapshot
// seals with when the worker has them, and the backup destinations its
// inventories define.
func etcdActivities(va *vaultapi.Activities, opts Options, hosts *sshhost.Activities, pool *sshpool.Pool) *etcdapi.Activities {
	e := &etcdapi.Activities{Vault: va, Destinations: inventoryBackups{opts.Clusters}, Hosts: hosts, Files: pool}
	if opts.SealKeys != nil {
		e.Keys = opts.SealKeys
	}
	return e
}

// inventoryBackups are the backup destinations of the worker's own
// inventories (their backups sections): the only ones a run can name.
type inventoryBackups struct{ clusters trust.Registry }

func (b inventoryBackups) Destination(cluster, name string) (etcd.Destination, error) {
	if b.clusters == nil {
		return etcd.Destination{}, fmt.Errorf("this worker serves no cluster (--clusters FILE|DIR)")
	}
	c, err := b.clusters.Cluster(cluster)
	if err != nil {
		return etcd.Destination{}, err
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
