package kubeapi

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/activities/nodefiles"
)

// controlPlane are the static pods an upgrade changes, in its order.
var controlPlane = []string{kube.APIServer, kube.ControllerManager, kube.Scheduler}

// UpgradePlan plans an upgrade of the cluster to in.Version
// (kube.upgrade-plan): what runs now, read from the controllers'
// manifests, every Node's kubelet, kube-proxy's DaemonSet and the API
// server's /version; the skew policy checked against it; each manifest
// with its new image (and a diff); the flags the new release removed,
// by file and line. Any problem fails it, not retried, before anything
// has changed; its result then still says what was found.
func (a *Activities) UpgradePlan(ctx context.Context, in kube.UpgradePlanInput) (kube.UpgradePlanResult, error) {
	target, err := kube.ParseVersion(in.Version)
	if err != nil {
		return kube.UpgradePlanResult{}, temporal.NewNonRetryableApplicationError("version: "+err.Error(), errtype.InvalidInput, nil)
	}
	if target.Suffix != "" {
		return kube.UpgradePlanResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("version: %s is a build of a distribution, not a Kubernetes release", in.Version), errtype.InvalidInput, nil)
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.UpgradePlanResult{}, err
	}
	res := kube.UpgradePlanResult{To: target.String(), Running: []kube.Running{}, Controllers: []kube.ControllerChange{},
		Kubelets: []kube.KubeletChange{}, Images: map[string][]string{}, CRIImages: map[string][]string{}, Problems: []string{}}
	var diff strings.Builder

	controllers := planControllers(in, target, &res, &diff)

	// The API server's own word, and the kubelets and kube-proxy.
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		res.Running = append(res.Running, kube.Running{Component: kube.APIServer, Host: "(the cluster's API)", Version: v.GitVersion, From: "/version"})
	} else {
		return res, apiError("", err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, apiError("", err)
	}
	for _, n := range nodes.Items {
		v := n.Status.NodeInfo.KubeletVersion
		res.Running = append(res.Running, kube.Running{Component: kube.Kubelet, Host: n.Name, Version: v, From: "status.nodeInfo of Node " + n.Name})
		behind := true
		if kv, err := kube.ParseVersion(v); err == nil {
			behind = kv.Compare(target) < 0
		}
		res.Kubelets = append(res.Kubelets, kube.KubeletChange{Node: n.Name, Version: v, Behind: behind})
	}
	if ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{}); err == nil {
		for _, c := range ds.Spec.Template.Spec.Containers {
			if c.Name == kube.KubeProxy {
				if v, ok := imageVersion(c.Image); ok {
					res.Running = append(res.Running, kube.Running{Component: kube.KubeProxy, Host: "DaemonSet kube-system/kube-proxy", Version: v, From: "image " + c.Image})
				}
				// Its new image on every host before the DaemonSet
				// rolls out.
				if to := retag(c.Image, target); to != c.Image {
					for _, host := range slices.Sorted(maps.Keys(in.Layouts)) {
						res.CRIImages[host] = append(res.CRIImages[host], to)
					}
				}
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return res, apiError("", err)
	}

	// CoreDNS, where the cluster runs it.
	dns, corefile, err := planCoreDNS(ctx, cs, target)
	if err != nil {
		return res, apiError("", err)
	}
	if dns != nil {
		res.CoreDNS, res.CoreDNSTag, res.Corefile = dns, dns.Tag, dns.Corefile
		if dns.Corefile != "" {
			writeDiff(&diff, "ConfigMap kube-system/coredns", corefileKey, corefile, dns.Corefile)
		}
	}

	planKubelets(in, controllers, target, &res, &diff)

	// etcd: the release each member says it runs, and what the target's
	// API server needs (an etcd upgrade is a stage of its own).
	for _, m := range in.Etcd {
		res.Running = append(res.Running, kube.Running{Component: kube.Etcd, Host: m.Name, Version: m.Version, From: "the status etcd member " + m.Name + " answers"})
	}
	res.Problems = append(res.Problems, kube.EtcdSkew(target, in.Etcd)...)

	res.Problems = append(res.Problems, kube.UpgradeSkew(res.To, res.Running)...)
	if v, ok := oldestAPIServer(res.Running); ok {
		res.From = v
	}
	res.Diff = diff.String()
	res.Manifests = manifestsLine(in.Layouts, controllers, target)
	res.Summary = summary(res)
	if len(res.Problems) > 0 {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the upgrade to %s is refused before anything changed: %s",
			res.To, strings.Join(res.Problems, "; ")), errtype.UpgradeRefused, nil, res)
	}
	return res, nil
}

// summary is the plan in a few lines: the releases, what each
// controller's static pods change to, and the kubelets behind.
func summary(res kube.UpgradePlanResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s", cmp.Or(res.From, "?"), res.To)
	for _, c := range res.Controllers {
		for _, m := range c.Manifests {
			if m.From == m.To {
				fmt.Fprintf(&b, "\n%s %s: %s (kept)", c.Host, m.Component, m.From)
				continue
			}
			fmt.Fprintf(&b, "\n%s %s: %s → %s", c.Host, m.Component, m.From, m.To)
		}
	}
	behind := 0
	for _, k := range res.Kubelets {
		if k.Behind {
			behind++
		}
	}
	fmt.Fprintf(&b, "\nkubelets: %d of %d Nodes behind", behind, len(res.Kubelets))
	if res.KubeletImage != "" {
		fmt.Fprintf(&b, " → %s", res.KubeletImage)
	}
	if res.Manifests != "" {
		b.WriteString("\nmanifests: " + res.Manifests)
	}
	if c := res.CoreDNS; c != nil {
		if c.Kept != "" {
			fmt.Fprintf(&b, "\ncoredns: %s (kept: %s)", c.From, c.Kept)
		} else {
			fmt.Fprintf(&b, "\ncoredns: %s → %s", c.From, c.To)
			if c.Corefile != "" {
				b.WriteString(", its Corefile migrated")
			}
		}
	}
	if etcd := etcdLine(res); etcd != "" {
		b.WriteString("\n" + etcd)
	}
	return b.String()
}

// etcdLine is the summary's line on etcd: the releases its members run
// (kept: the upgrade never changes etcd) and the oldest the target needs.
func etcdLine(res kube.UpgradePlanResult) string {
	count := map[string]int{}
	var order []string
	for _, r := range res.Running {
		if r.Component != kube.Etcd {
			continue
		}
		if count[r.Version] == 0 {
			order = append(order, r.Version)
		}
		count[r.Version]++
	}
	if len(order) == 0 {
		return ""
	}
	var runs []string
	for _, v := range order {
		runs = append(runs, fmt.Sprintf("%s on %d member(s)", v, count[v]))
	}
	line := "etcd: " + strings.Join(runs, ", ") + ", kept"
	if to, err := kube.ParseVersion(res.To); err == nil {
		if need, ok := kube.EtcdNeeded(to); ok {
			line += fmt.Sprintf(" (%s needs %d.%d or newer)", res.To, need.Major, need.Minor)
		}
	}
	return line
}

// manifestImage is the image of a static pod manifest's container named
// component (or its only one) and the release its tag names.
func manifestImage(component, content string) (image, version, problem string) {
	image, err := nodefiles.ManifestImage(content, component)
	if err != nil {
		return "", "", err.Error()
	}
	v, ok := imageVersion(image)
	if !ok {
		return image, "", fmt.Sprintf("its image %s has no release tag (vMAJOR.MINOR.PATCH): Kedge cannot tell what it runs", image)
	}
	return image, v, ""
}

// imageVersion reads the release an image's tag names ("…:v1.35.4",
// "…:v1.35.4-amd64"); a digest after the tag is kept out.
func imageVersion(image string) (string, bool) {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", false
	}
	tag := image[i+1:]
	v, err := kube.ParseVersion(tag)
	if err != nil || !strings.HasPrefix(tag, "v") {
		return "", false
	}
	return kube.Version{Major: v.Major, Minor: v.Minor, Patch: v.Patch}.String(), true
}

// retag is image with its tag set to the release.
func retag(image string, v kube.Version) string { return nodefiles.Retag(image, v.String()) }

// kubeletImage is the new release's kubelet image: the repository the
// first controller's kubelet runs (else any node's), tagged the release.
func kubeletImage(layouts map[string]kube.HostLayout, controllers []string, v kube.Version) string {
	for _, h := range append(controllers, slices.Sorted(maps.Keys(layouts))...) {
		if k := layouts[h].Kubelet; k != nil && k.Image != "" {
			return retag(k.Image, v)
		}
	}
	return ""
}

func oldestAPIServer(running []kube.Running) (string, bool) {
	var oldest *kube.Version
	for _, r := range running {
		if r.Component != kube.APIServer {
			continue
		}
		if v, err := kube.ParseVersion(r.Version); err == nil && (oldest == nil || v.Compare(*oldest) < 0) {
			oldest = &v
		}
	}
	if oldest == nil {
		return "", false
	}
	return oldest.String(), true
}

// writeDiff adds a file's unified diff, headed by its host.
func writeDiff(b *strings.Builder, host, path, before, after string) {
	lines := func(s string) []string {
		if s == "" {
			return nil // a new file
		}
		return difflib.SplitLines(s)
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(before), B: lines(after),
		FromFile: host + ":" + path, ToFile: host + ":" + path, Context: 2,
	})
	b.WriteString(d)
}

// manifestsLine says what the controllers' manifests become: on
// Typhoon's layout the manifests each controller has, with the image tag
// changed and nothing else, Kedge knowing no Typhoon release's templates
// for the target to render instead; on Kedge's, its own (the same
// change: it renders them from the inventory's version).
func manifestsLine(layouts map[string]kube.HostLayout, controllers []string, v kube.Version) string {
	for _, h := range controllers {
		if k := layouts[h].Kind; k == layout.KindTyphoonFlatcar || k == layout.KindTyphoonFCOS {
			return fmt.Sprintf("Typhoon's as each controller has them, the image tag changed and nothing else (Kedge holds no Typhoon release's templates for %s)", v.MinorString())
		}
	}
	return ""
}

// planControllers reads the controllers' manifests: what each runs, and
// what it will (each manifest with its new image, its diff, the flags
// the release removed). It returns the controllers, sorted.
func planControllers(in kube.UpgradePlanInput, target kube.Version, res *kube.UpgradePlanResult, diff *strings.Builder) []string {
	controllers := map[string]bool{}
	for _, byHost := range in.Manifests {
		for host := range byHost {
			controllers[host] = true
		}
	}
	for _, host := range slices.Sorted(maps.Keys(controllers)) {
		change := kube.ControllerChange{Host: host, Manifests: []kube.ManifestChange{}, Images: map[string]string{}}
		for _, component := range controlPlane {
			m, ok := in.Manifests[component][host]
			if !ok {
				continue
			}
			path := in.Layouts[host].StaticPods[component]
			if path == "" {
				res.Problems = append(res.Problems, fmt.Sprintf("%s on %s: host.layout found no manifest for it", component, host))
				continue
			}
			from, version, problem := manifestImage(component, m.Content)
			if problem != "" {
				res.Problems = append(res.Problems, fmt.Sprintf("%s on %s (%s): %s", component, host, path, problem))
				continue
			}
			res.Running = append(res.Running, kube.Running{Component: component, Host: host, Version: version, From: "image of " + path})
			to := retag(from, target)
			set, err := nodefiles.SetImage(render.SetImageInput{Manifest: m.Content, Container: component, Image: to})
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s on %s (%s): %v", component, host, path, err))
				continue
			}
			removed, err := kube.FlagsRemovedBy(target, component, path, []byte(m.Content))
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s on %s: %v", component, host, err))
			}
			for _, r := range removed {
				res.Problems = append(res.Problems, host+": "+r)
			}
			change.Manifests = append(change.Manifests, kube.ManifestChange{Component: component, Path: path, From: from, To: to, Content: set.Content})
			change.Images[component] = to
			if set.Changed {
				res.Images[host] = append(res.Images[host], to)
				res.CRIImages[host] = append(res.CRIImages[host], to)
				writeDiff(diff, host, path, m.Content, set.Content)
			}
		}
		if in.Layouts[host].Kind == layout.KindKedge && in.InventoryVersion != target.String() {
			res.Problems = append(res.Problems, fmt.Sprintf("%s is of Kedge's layout, whose static pods Kedge renders from the inventory's kubernetes.version (%s): "+
				"set it to %s first, or a cert-renewal after the upgrade would render the old release again", host, cmp.Or(in.InventoryVersion, "not set"), target))
		}
		for _, component := range controlPlane {
			if _, ok := change.Images[component]; !ok {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: no %s manifest was read: every controller runs the whole control plane as static pods", host, component))
			}
		}
		res.Controllers = append(res.Controllers, change)
	}
	return slices.Sorted(maps.Keys(controllers))
}

// planKubelets sets the new release's kubelet image (the controllers'
// repository, tagged the release), what each host must pull for it, and
// each kubelet's KUBELET_IMAGE drop-in as the swap will write it.
func planKubelets(in kube.UpgradePlanInput, controllers []string, target kube.Version, res *kube.UpgradePlanResult, diff *strings.Builder) {
	res.KubeletImage = kubeletImage(in.Layouts, controllers, target)
	if res.KubeletImage != "" {
		for _, host := range slices.Sorted(maps.Keys(in.Layouts)) {
			k := in.Layouts[host].Kubelet
			if k == nil || k.Image == "" || k.Image == res.KubeletImage {
				continue
			}
			res.Images[host] = append(res.Images[host], res.KubeletImage)
			// The drop-in the kubelet swap writes, refused here when the
			// swap would not know where to write it (after the control
			// plane is upgraded would be too late).
			if k.ImageDropInRefused != "" {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: its kubelet could not be swapped to %s: %s", host, res.KubeletImage, k.ImageDropInRefused))
				continue
			}
			if k.ImageDropIn == "" {
				continue
			}
			dropIn, err := nodefiles.DropIn(map[string]string{layout.ImageVariable: res.KubeletImage})
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: the kubelet's drop-in: %v", host, err))
				continue
			}
			writeDiff(diff, host, k.ImageDropIn, in.DropIns[host].Content, dropIn)
		}
	}
}
