package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
)

// EvictionHard are the hard eviction thresholds of every test node's
// kubelet (ForThisMachine, MachineDropIn). The nodes share this machine's
// disk, so the kubelet's defaults (imagefs.available<15%,
// nodefs.available<10%) would taint every node with disk pressure, and
// leave its pods Pending, whenever the machine's disk is more than 85%
// full, whatever the tests themselves use. The disk signals are lowered to
// 1%; memory and inodes keep the kubelet's defaults, written out because
// a kubelet given some signals takes none of the defaults for the others.
var EvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "1%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "1%",
	"imagefs.inodesFree": "5%",
}

// Image garbage collection, which at the kubelet's default (85% of the
// image filesystem used) would delete the images a test imported and
// its pods use with imagePullPolicy Never, starts only on a full disk.
const (
	imageGCHigh = 100
	imageGCLow  = 99
)

// SyncFrequency is the test world's clock for a kubelet's pod syncs
// (syncFrequency, 1m by default): how soon a running pod's mounted
// ConfigMaps, such as kube-root-ca.crt, follow the API. A CA rotation's
// podSettle on the test nodes is a few of these, not a minute and a half.
const SyncFrequency = 10 * time.Second

// machineKubelet sets in m what every test node's kubelet needs whatever
// the machine: EvictionHard and the image garbage collection thresholds;
// and the test world's clock, SyncFrequency.
func machineKubelet(m map[string]any) {
	m["syncFrequency"] = SyncFrequency.String()
	eh := map[string]any{}
	for k, v := range EvictionHard {
		eh[k] = v
	}
	m["evictionHard"] = eh
	m["imageGCHighThresholdPercent"] = imageGCHigh
	m["imageGCLowThresholdPercent"] = imageGCLow
}

// CheckEviction reads the configuration node's running kubelet uses (its
// configz, through the API server's proxy to the node) and fails unless
// its evictionHard is EvictionHard, image garbage collection starts only
// on a full disk and it syncs pods every SyncFrequency: what the kubelet
// made of the config and its drop-ins, not what the files say.
func CheckEviction(ctx context.Context, cs kubernetes.Interface, node string) error {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("configz of %s: %w: %s", node, err, raw)
	}
	var z struct {
		KubeletConfig struct {
			EvictionHard map[string]string `json:"evictionHard"`
			GCHigh       int               `json:"imageGCHighThresholdPercent"`
			GCLow        int               `json:"imageGCLowThresholdPercent"`
			Sync         string            `json:"syncFrequency"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &z); err != nil {
		return fmt.Errorf("configz of %s: %w", node, err)
	}
	kc := z.KubeletConfig
	if !maps.Equal(kc.EvictionHard, EvictionHard) {
		return fmt.Errorf("the kubelet of %s evicts at %v, want %v", node, sorted(kc.EvictionHard), sorted(EvictionHard))
	}
	if kc.GCHigh != imageGCHigh || kc.GCLow != imageGCLow {
		return fmt.Errorf("the kubelet of %s collects images from %d%% down to %d%%, want %d%% and %d%%", node, kc.GCHigh, kc.GCLow, imageGCHigh, imageGCLow)
	}
	if d, err := time.ParseDuration(kc.Sync); err != nil || d != SyncFrequency {
		return fmt.Errorf("the kubelet of %s syncs its pods every %q, want %s", node, kc.Sync, SyncFrequency)
	}
	return nil
}

// sorted is m as "key<value" in key order, for a message.
func sorted(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"<"+m[k])
	}
	return out
}
