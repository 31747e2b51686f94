package etcdapi

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/imageref"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/layout"
)

// minBeforeMinor is, for a minor etcd moves to, the patch every member of
// the minor before must run first. etcd's 3.5 to 3.6 guide asks for a late
// 3.5 patch: from v3.5.1 to v3.5.19 a voting member may come back as a
// learner under 3.6 ("too many learner member in cluster", etcd issue
// 19557, fixed in 3.5.20), and later 3.5 patches fixed more upgrade
// blockers; the guide's minimum has risen with them.
var minBeforeMinor = map[string]kube.Version{
	"3.6": {Major: 3, Minor: 5, Patch: 32},
}

// UpgradePlan plans an etcd upgrade (etcd.upgrade-plan) from what the
// steps before read, changing nothing: the release rules etcd documents
// (one minor at a time, never down, the patch a minor needs first), each
// member's new image and where it is set, followers first and the leader
// last. Refused (UpgradeRefused, not retried) with every problem named.
func (a *Activities) UpgradePlan(_ context.Context, in etcd.UpgradePlanInput) (etcd.UpgradePlanResult, error) {
	res := planEtcdUpgrade(in)
	if len(res.Problems) > 0 {
		return res, temporal.NewNonRetryableApplicationError("etcd upgrade refused: "+strings.Join(res.Problems, "; "), errtype.UpgradeRefused, nil, res)
	}
	return res, nil
}

func planEtcdUpgrade(in etcd.UpgradePlanInput) etcd.UpgradePlanResult {
	res := etcd.UpgradePlanResult{Images: map[string]string{}, Previous: map[string]string{}}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	to, err := kube.ParseVersion(in.Version)
	if err != nil || to.Suffix != "" || to.Major != 3 {
		problem("version: %q is not an etcd 3 release (want MAJOR.MINOR.PATCH, e.g. 3.6.16)", in.Version)
		return res
	}
	res.To = plain(to)
	if in.Image != "" {
		if err := imageref.Check(in.Image); err != nil {
			problem("image: %v", err)
		}
	}
	checkInventoryImage(in, to, problem)
	hosts := hostsByMember(in.Layouts, problem)
	from := map[string]bool{}
	var followers, leaders []etcd.MemberChange
	for _, m := range in.Members {
		v, err := kube.ParseVersion(m.Version)
		if err != nil {
			problem("etcd member %s says it runs %q: not a release Kedge can read", m.Name, m.Version)
			continue
		}
		from[plain(v)] = true
		checkStep(m.Name, v, to, problem)
		host, ok := hosts[m.Name]
		if !ok {
			problem("etcd member %s runs on no controller of the inventory (host.layout's etcd.name): Kedge cannot upgrade it", m.Name)
			continue
		}
		if v.Compare(to) == 0 {
			continue
		}
		c, err := memberChange(host, in.Layouts[host].Etcd, m, cmp.Or(in.Image, kedgeImage(in, host)), to)
		if err != nil {
			problem("%s: %v", host, err)
			continue
		}
		if m.Leader {
			leaders = append(leaders, c)
		} else {
			followers = append(followers, c)
		}
	}
	for f := range from {
		res.From = append(res.From, f)
	}
	slices.SortFunc(res.From, func(a, b string) int { return mustVersion(a).Compare(mustVersion(b)) })
	res.Members = append(followers, leaders...)
	for _, c := range res.Members {
		res.Order = append(res.Order, c.Host)
		res.Images[c.Host], res.Previous[c.Host] = c.Image, c.Previous
	}
	res.Upgrade = len(res.Members) > 0
	res.Summary = etcdSummary(res, len(in.Members))
	return res
}

// kedgeImage is the image a member on Kedge's layout runs: the
// inventory's, which Kedge renders its manifest from ("" elsewhere).
func kedgeImage(in etcd.UpgradePlanInput, host string) string {
	if in.Layouts[host].Etcd.Mode == layout.EtcdStaticPod {
		return in.InventoryImage
	}
	return ""
}

// checkInventoryImage refuses an upgrade of Kedge's layout while the
// inventory's etcd image names another release: a later render of the
// manifest (cert-renewal, a controller join) would take the member back.
func checkInventoryImage(in etcd.UpgradePlanInput, to kube.Version, problem func(string, ...any)) {
	if in.Image != "" || in.InventoryImage == "" {
		return
	}
	kedge := false
	for _, h := range in.Layouts {
		kedge = kedge || h.Etcd.Mode == layout.EtcdStaticPod
	}
	if !kedge {
		return
	}
	i := strings.LastIndex(in.InventoryImage, ":")
	if v, err := kube.ParseVersion(in.InventoryImage[i+1:]); i < 0 || err != nil || v.Compare(to) != 0 {
		want, err := retag(in.InventoryImage, to)
		if err != nil {
			want = "an image of " + plain(to)
		}
		problem("the inventory's kubernetes.etcdImage is %s: Kedge renders etcd's manifest from it (cert-renewal, a controller join), so set it to %s first", in.InventoryImage, want)
	}
}

// plain is an etcd release as etcd writes it: 3.6.16.
func plain(v kube.Version) string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

func mustVersion(s string) kube.Version {
	v, _ := kube.ParseVersion(s)
	return v
}

// hostsByMember maps each etcd member name to the controller that runs it.
func hostsByMember(layouts map[string]etcd.Host, problem func(string, ...any)) map[string]string {
	out := map[string]string{}
	names := make([]string, 0, len(layouts))
	for h := range layouts {
		names = append(names, h)
	}
	slices.Sort(names)
	for _, h := range names {
		e := layouts[h].Etcd
		switch {
		case e.Mode != layout.EtcdHostUnit && e.Mode != layout.EtcdStaticPod:
			problem("%s runs no etcd Kedge knows (host.layout's etcd mode %q)", h, e.Mode)
		case e.Name == "":
			problem("%s: its etcd has no member name (--name / ETCD_NAME)", h)
		case out[e.Name] != "":
			problem("%s and %s both run etcd member %s", out[e.Name], h, e.Name)
		default:
			out[e.Name] = h
		}
	}
	return out
}

// checkStep applies etcd's upgrade policy to one member at v going to
// to: the same major, never down, one minor at a time, and the patch
// the next minor needs first.
func checkStep(name string, v, to kube.Version, problem func(string, ...any)) {
	switch {
	case v.Major != to.Major:
		problem("etcd member %s runs %s: Kedge upgrades etcd within major %d only", name, plain(v), to.Major)
	case v.Compare(to) > 0:
		problem("etcd member %s runs %s, newer than %s: going back is etcd's own downgrade (etcdctl downgrade), not an upgrade", name, plain(v), plain(to))
	case to.Minor-v.Minor > 1:
		problem("etcd member %s runs %s: %s skips a minor (etcd upgrades one minor at a time): upgrade to %d.%d first", name, plain(v), plain(to), to.Major, v.Minor+1)
	case to.Minor == v.Minor+1:
		need, ok := minBeforeMinor[fmt.Sprintf("%d.%d", to.Major, to.Minor)]
		if ok && v.Compare(need) < 0 {
			problem("etcd member %s runs %s: etcd's guide to %d.%d asks every %d.%d member to run %s or later first: upgrade to the newest %d.%d patch, then to %s",
				name, plain(v), to.Major, to.Minor, v.Major, v.Minor, plain(need), v.Major, v.Minor, plain(to))
		}
	}
}

// memberChange is the change on host for member m: the image it runs
// retagged (or image), set where its layout says.
func memberChange(host string, e etcd.HostEtcd, m etcd.MemberHealth, image string, to kube.Version) (etcd.MemberChange, error) {
	c := etcd.MemberChange{Host: host, Member: m.Name, Leader: m.Leader, From: m.Version, Previous: e.Image}
	switch e.Mode {
	case layout.EtcdHostUnit:
		if e.ImageDropInRefused != "" {
			return c, fmt.Errorf("%s", e.ImageDropInRefused)
		}
		if e.ImageInEffect != e.Image {
			return c, fmt.Errorf("%s's files set %s=%s but systemd runs %s (changed without a daemon-reload): reload, check etcd, then upgrade",
				e.Unit, layout.EtcdImageVariable, e.Image, e.ImageInEffect)
		}
		c.Where = e.ImageDropIn
	case layout.EtcdStaticPod:
		c.Where = e.Manifest
	}
	if image != "" {
		c.Image = image
		return c, nil
	}
	next, err := retag(e.Image, to)
	if err != nil {
		return c, err
	}
	c.Image = next
	return c, nil
}

// retag is ref with its tag set to the release in the form the tag has:
// v3.5.13 becomes v3.6.16, 3.5.13-0 becomes 3.6.16-0.
func retag(ref string, to kube.Version) (string, error) {
	if err := imageref.Check(ref); err != nil {
		return "", err
	}
	if strings.Contains(ref, "@") {
		return "", fmt.Errorf("etcd's image %s is pinned by digest: name the new one (image=)", ref)
	}
	i := strings.LastIndex(ref, ":")
	if i < strings.LastIndex(ref, "/") {
		return "", fmt.Errorf("etcd's image %s has no tag: name the new one (image=)", ref)
	}
	repo, tag := ref[:i], ref[i+1:]
	v, err := kube.ParseVersion(tag)
	if err != nil {
		return "", fmt.Errorf("etcd's image %s has a tag that names no release: name the new one (image=)", ref)
	}
	prefix := ""
	if strings.HasPrefix(tag, "v") {
		prefix = "v"
	}
	return repo + ":" + prefix + plain(to) + v.Suffix, nil
}

// etcdSummary is the plan in a few lines.
func etcdSummary(res etcd.UpgradePlanResult, members int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "etcd %s to %s", strings.Join(res.From, ", "), res.To)
	if !res.Upgrade {
		b.WriteString(": every member runs it already, nothing to do")
		return b.String()
	}
	fmt.Fprintf(&b, ", %d of %d member(s), one at a time, the leader last:", len(res.Members), members)
	for _, c := range res.Members {
		role := "follower"
		if c.Leader {
			role = "leader"
		}
		fmt.Fprintf(&b, "\n  %s (%s, %s): %s -> %s in %s", c.Host, c.Member, role, c.Previous, c.Image, c.Where)
	}
	if members == 1 {
		b.WriteString("\nOne member: etcd, and the API with it, is down while it restarts.")
	}
	return b.String()
}
