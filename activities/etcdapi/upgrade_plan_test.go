package etcdapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
)

// typhoonPlan is three Typhoon controllers, tyc2 etcd's leader, every
// member on version.
func typhoonPlan(version, to string) etcd.UpgradePlanInput {
	in := etcd.UpgradePlanInput{Version: to, Layouts: map[string]etcd.Host{}}
	for _, h := range []string{"tyc1", "tyc2", "tyc3"} {
		in.Members = append(in.Members, etcd.MemberHealth{Name: h, Version: version, Leader: h == "tyc2"})
		in.Layouts[h] = etcd.Host{Etcd: etcd.HostEtcd{Mode: "host-unit", Name: h, Unit: "etcd-member.service",
			Image: "quay.io/coreos/etcd:v" + version, ImageInEffect: "quay.io/coreos/etcd:v" + version,
			ImageDropIn: "/etc/systemd/system/etcd-member.service.d/10-image.conf"}}
	}
	return in
}

func TestAnEtcdUpgradeGoesFollowersFirstInTheImagesOwnTagForm(t *testing.T) {
	a := &Activities{}
	res, err := a.UpgradePlan(context.Background(), typhoonPlan("3.5.36", "v3.6.16"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Upgrade || !slices.Equal(res.Order, []string{"tyc1", "tyc3", "tyc2"}) || res.To != "3.6.16" || !slices.Equal(res.From, []string{"3.5.36"}) {
		t.Errorf("plan: upgrade %v order %v from %v to %s", res.Upgrade, res.Order, res.From, res.To)
	}
	if res.Images["tyc2"] != "quay.io/coreos/etcd:v3.6.16" || res.Previous["tyc2"] != "quay.io/coreos/etcd:v3.5.36" {
		t.Errorf("images %v, previous %v", res.Images, res.Previous)
	}
	for _, want := range []string{"etcd 3.5.36 to 3.6.16, 3 of 3 member(s), one at a time, the leader last:",
		"tyc2 (tyc2, leader): quay.io/coreos/etcd:v3.5.36 -> quay.io/coreos/etcd:v3.6.16 in /etc/systemd/system/etcd-member.service.d/10-image.conf"} {
		if !strings.Contains(res.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.Summary)
		}
	}

	// Kedge's layout: registry.k8s.io/etcd's tags end in -0; the
	// inventory names the image Kedge renders; a member already upgraded
	// is left; one member is named as an outage.
	in := etcd.UpgradePlanInput{Version: "3.7.3", InventoryImage: "registry.k8s.io/etcd:3.7.3-0", Layouts: map[string]etcd.Host{
		"c1": {Etcd: etcd.HostEtcd{Mode: "static-pod", Name: "c1", Manifest: "/etc/kubernetes/manifests/etcd.yaml", Image: "registry.k8s.io/etcd:3.6.16-0"}}},
		Members: []etcd.MemberHealth{{Name: "c1", Version: "3.6.16", Leader: true}}}
	res, err = a.UpgradePlan(context.Background(), in)
	if err != nil || res.Images["c1"] != "registry.k8s.io/etcd:3.7.3-0" || !strings.Contains(res.Summary, "One member") ||
		res.Members[0].Where != "/etc/kubernetes/manifests/etcd.yaml" {
		t.Errorf("Kedge's layout: %v %+v", err, res)
	}
	in.Version, in.InventoryImage = "3.6.16", "registry.k8s.io/etcd:3.6.16-0"
	if res, err = a.UpgradePlan(context.Background(), in); err != nil || res.Upgrade || len(res.Order) != 0 || !strings.Contains(res.Summary, "nothing to do") {
		t.Errorf("already there: %v %+v", err, res)
	}
	in.Version, in.Image = "3.7.3", "mirror.example/etcd@sha256:"+strings.Repeat("a", 64)
	if res, err = a.UpgradePlan(context.Background(), in); err != nil || res.Images["c1"] != in.Image {
		t.Errorf("an image named: %v %+v", err, res)
	}
}

func TestAnEtcdUpgradeIsRefusedBeforeAnythingChanges(t *testing.T) {
	a := &Activities{}
	for name, tc := range map[string]struct {
		from, to string
		change   func(*etcd.UpgradePlanInput)
		want     string
	}{
		"3.6 from an early 3.5 patch": {"3.5.13", "3.6.16", nil,
			"etcd member tyc1 runs 3.5.13: etcd's guide to 3.6 asks every 3.5 member to run 3.5.32 or later first: upgrade to the newest 3.5 patch, then to 3.6.16"},
		"a skipped minor": {"3.5.36", "3.7.3", nil, "3.7.3 skips a minor (etcd upgrades one minor at a time): upgrade to 3.6 first"},
		"a downgrade":     {"3.6.16", "3.5.36", nil, "newer than 3.5.36: going back is etcd's own downgrade"},
		"not a release":   {"3.5.36", "latest", nil, `version: "latest" is not an etcd 3 release`},
		"a member on no controller": {"3.5.36", "3.5.40", func(in *etcd.UpgradePlanInput) { delete(in.Layouts, "tyc3") },
			"etcd member tyc3 runs on no controller of the inventory"},
		"a drop-in that sets more": {"3.5.36", "3.5.40", func(in *etcd.UpgradePlanInput) {
			e := in.Layouts["tyc1"]
			e.Etcd.ImageDropIn, e.Etcd.ImageDropInRefused = "", "20-site.conf sets ETCD_IMAGE among other settings"
			in.Layouts["tyc1"] = e
		}, "tyc1: 20-site.conf sets ETCD_IMAGE among other settings"},
		"a unit changed without a reload": {"3.5.36", "3.5.40", func(in *etcd.UpgradePlanInput) {
			e := in.Layouts["tyc3"]
			e.Etcd.ImageInEffect = "quay.io/coreos/etcd:v3.5.13"
			in.Layouts["tyc3"] = e
		}, "tyc3: etcd-member.service's files set ETCD_IMAGE=quay.io/coreos/etcd:v3.5.36 but systemd runs quay.io/coreos/etcd:v3.5.13"},
		"Kedge's inventory on the old release": {"3.5.36", "3.6.16", func(in *etcd.UpgradePlanInput) {
			in.InventoryImage = "registry.k8s.io/etcd:3.5.36-0"
			e := in.Layouts["tyc1"]
			e.Etcd.Mode, e.Etcd.Manifest = "static-pod", "/etc/kubernetes/manifests/etcd.yaml"
			in.Layouts["tyc1"] = e
		}, "the inventory's kubernetes.etcdImage is registry.k8s.io/etcd:3.5.36-0: Kedge renders etcd's manifest from it (cert-renewal, a controller join), so set it to registry.k8s.io/etcd:3.6.16-0 first"},
		"a digest": {"3.5.36", "3.5.40", func(in *etcd.UpgradePlanInput) {
			e := in.Layouts["tyc2"]
			e.Etcd.Image = "quay.io/coreos/etcd@sha256:" + strings.Repeat("b", 64)
			e.Etcd.ImageInEffect = e.Etcd.Image
			in.Layouts["tyc2"] = e
		}, "is pinned by digest: name the new one (image=)"},
	} {
		t.Run(name, func(t *testing.T) {
			in := typhoonPlan(tc.from, tc.to)
			if tc.change != nil {
				tc.change(&in)
			}
			_, err := a.UpgradePlan(context.Background(), in)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || !errtype.Is(err, errtype.UpgradeRefused) || !app.NonRetryable() || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want UpgradeRefused with %q", err, tc.want)
			}
		})
	}
}
