package etcd

import (
	"time"

	"kedge.dev/kedge/actions/spec"
)

// UpgradePlanAction is the action name of UpgradePlan.
const UpgradePlanAction = "etcd.upgrade-plan"

// UpgradePlanInput is an etcd upgrade to Version and what the steps
// before read: every member as it answered for itself (etcd.health), and
// how each controller runs etcd (host.layout).
type UpgradePlanInput struct {
	Version string `json:"version" kedge:"required" doc:"the etcd release every member is to run, e.g. 3.6.16 (a leading v is fine)"`
	// Image, when set, is the reference every member runs instead of its
	// own repository retagged (a digest-pinned image needs it).
	Image   string         `json:"image,omitempty" doc:"the image every member runs, e.g. quay.io/coreos/etcd:v3.6.16 (default: each member's own repository, tagged the release in the form its tag has: v3.6.16, or 3.6.16-0 for registry.k8s.io/etcd)"`
	Members []MemberHealth `json:"members" kedge:"required" doc:"etcd.health's members: the release each runs and the leader"`
	// InventoryImage is the inventory's kubernetes.etcdImage: what Kedge
	// renders etcd's static pod from on its own layout (bootstrap,
	// cert-renewal, a controller join).
	InventoryImage string          `json:"inventoryImage,omitempty" doc:"the inventory's kubernetes.etcdImage: on Kedge's layout it must name the release (Kedge renders etcd's manifest from it), and members run it"`
	Layouts        map[string]Host `json:"layouts" kedge:"required" doc:"host.layout's outputs of the controllers, by host: how each runs etcd and the image it runs"`
}

// Host is what the plan reads of a controller's host.layout outputs.
type Host struct {
	Etcd HostEtcd `json:"etcd"`
}

// HostEtcd is what the plan reads of host.layout's etcd.
type HostEtcd struct {
	Mode               string `json:"mode"`
	Name               string `json:"name"`
	Unit               string `json:"unit"`
	Manifest           string `json:"manifest"`
	Image              string `json:"image"`
	ImageInEffect      string `json:"imageInEffect"`
	ImageDropIn        string `json:"imageDropIn"`
	ImageDropInRefused string `json:"imageDropInRefused"`
}

// UpgradePlanResult is what the upgrade changes, member by member.
type UpgradePlanResult struct {
	// From lists the releases the members run now, oldest first; To is
	// the release upgraded to.
	From []string `json:"from"`
	To   string   `json:"to"`
	// Upgrade is false when every member runs To already: nothing to do.
	Upgrade bool `json:"upgrade"`
	// Order is the controllers whose members are upgraded, one at a time:
	// followers first, the leader (as etcd.health found it) last, so
	// leadership moves once.
	Order []string `json:"order"`
	// Images is each controller's new image, Previous the one it runs.
	Images   map[string]string `json:"images"`
	Previous map[string]string `json:"previous"`
	// Members is each member's change, in Order.
	Members []MemberChange `json:"members"`
	// Summary is the plan in a few lines, for a person to approve.
	Summary string `json:"summary"`
	// Problems refuse the upgrade (UpgradeRefused); empty when it may
	// start.
	Problems []string `json:"problems"`
}

// MemberChange is one member's upgrade.
type MemberChange struct {
	Host   string `json:"host"`
	Member string `json:"member"`
	Leader bool   `json:"leader"`
	From   string `json:"from"` // the release it runs
	// Where is what changes on the host: the drop-in that sets ETCD_IMAGE,
	// or the static pod manifest.
	Where string `json:"where"`
	Image string `json:"image"`
	// Previous is the image it runs now.
	Previous string `json:"previous"`
}

func init() {
	spec.Register(spec.Row{Name: UpgradePlanAction, Doc: "plan an etcd upgrade to a release, changing nothing: every member's release (etcd.health) against etcd's upgrade rules (the same major, never down, one minor at a time, and for 3.6 every 3.5 member on 3.5.32 or later first), each member's new image (its own repository, tagged the release in the form its tag has, or the image named) and where it is set (Typhoon's etcd-member.service: the drop-in that sets ETCD_IMAGE; Kedge's layout: the static pod manifest), followers first and the leader last; refused (UpgradeRefused, not retried) naming every problem",
		In: UpgradePlanInput{}, Out: UpgradePlanResult{}, Timeout: time.Minute,
		Summary: `plan the etcd upgrade to {{.In "version"}}`})
}
