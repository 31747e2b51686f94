package testhosts

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// standinHost is one fresh test host for the stand-in checks.
func standinHost(t *testing.T, base string) *Host {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real sshd host")
	}
	l, err := Start(context.Background(), Options{Count: 1, BaseIP: base, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Hosts[0]
}

// hostSh runs a shell script on h and returns its stdout and stderr, and
// whether it exited 0.
func hostSh(t *testing.T, h *Host, script string) (string, bool) {
	t.Helper()
	out, err := h.Exec(t.Context(), "sh", "-c", "exec 2>&1\n"+script)
	return strings.TrimSpace(string(out)), err == nil
}

func mustSh(t *testing.T, h *Host, script string) string {
	t.Helper()
	out, ok := hostSh(t, h, script)
	if !ok {
		t.Fatalf("%s: %s", script, out)
	}
	return out
}

// A changed drop-in counts only after daemon-reload: before, a restart
// runs the loaded unit and warns, as systemd does.
func TestSystemctlUsesTheLoadedUnitUntilDaemonReload(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	mustSh(t, h, `mkdir -p /etc/systemd/system/greeter.service.d
printf '[Service]\nEnvironment=GREETING=one OTHER=x\nExecStart=/bin/sleep 1000\n' > /etc/systemd/system/greeter.service
systemctl daemon-reload && systemctl start greeter`)
	greeting := func() string {
		return mustSh(t, h, `tr '\0' '\n' < /proc/$(systemctl show -p MainPID --value greeter)/environ | grep GREETING`)
	}
	if g := greeting(); g != "GREETING=one" {
		t.Fatalf("first start: %s", g)
	}
	mustSh(t, h, `printf '[Service]\nEnvironment="GREETING=two words"\n' > /etc/systemd/system/greeter.service.d/10-greeting.conf`)
	out := mustSh(t, h, "systemctl restart greeter")
	if !strings.Contains(out, "Warning: The unit file, source configuration file or drop-ins of greeter.service changed on disk. Run 'systemctl daemon-reload' to reload units.") {
		t.Errorf("restart without daemon-reload did not warn: %q", out)
	}
	if g := greeting(); g != "GREETING=one" {
		t.Errorf("restart without daemon-reload used the new drop-in: %s", g)
	}
	if got := mustSh(t, h, "systemctl show -p Environment -p NeedDaemonReload greeter"); got != "Environment=GREETING=one OTHER=x\nNeedDaemonReload=yes" {
		t.Errorf("show before daemon-reload: %q", got)
	}
	if out := mustSh(t, h, "systemctl status greeter"); !strings.Contains(out, "Warning: The unit file") {
		t.Errorf("status did not warn: %q", out)
	}
	out = mustSh(t, h, "systemctl daemon-reload && systemctl restart greeter")
	if strings.Contains(out, "Warning") {
		t.Errorf("restart after daemon-reload warned: %q", out)
	}
	if g := greeting(); g != "GREETING=two words" {
		t.Errorf("after daemon-reload: %s", g)
	}
	if got := mustSh(t, h, "systemctl show --property=Environment greeter"); got != `Environment="GREETING=two words" OTHER=x` {
		t.Errorf("show after daemon-reload: %q", got)
	}
	if out, ok := hostSh(t, h, "systemctl restart --frobnicate greeter"); ok || !strings.Contains(out, "unrecognized option '--frobnicate'") {
		t.Errorf("unknown option: %v %q", ok, out)
	}
	if out, ok := hostSh(t, h, "systemctl frobnicate greeter"); ok || !strings.Contains(out, "Unknown command verb 'frobnicate'") {
		t.Errorf("unknown verb: %v %q", ok, out)
	}
}

// enable makes the [Install] section's wants link, disable removes it,
// is-enabled reports it.
func TestSystemctlEnableMakesTheWantsLink(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	mustSh(t, h, `printf '[Service]\nExecStart=/bin/sleep 1000\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/wanted.service
printf '[Service]\nExecStart=/bin/sleep 1000\n' > /etc/systemd/system/static.service`)
	if out, ok := hostSh(t, h, "systemctl is-enabled wanted"); ok || out != "disabled" {
		t.Errorf("is-enabled before enable: %v %q", ok, out)
	}
	mustSh(t, h, "systemctl enable wanted")
	const link = "/etc/systemd/system/multi-user.target.wants/wanted.service"
	if got := mustSh(t, h, "readlink "+link); got != "/etc/systemd/system/wanted.service" {
		t.Errorf("wants link points at %q", got)
	}
	if out := mustSh(t, h, "systemctl is-enabled wanted"); out != "enabled" {
		t.Errorf("is-enabled: %q", out)
	}
	if out := mustSh(t, h, "systemctl is-enabled static"); out != "static" {
		t.Errorf("is-enabled of a unit without [Install]: %q", out)
	}
	mustSh(t, h, "systemctl disable wanted")
	if _, ok := hostSh(t, h, "test -e "+link); ok {
		t.Error("disable left the wants link")
	}
	if out, ok := hostSh(t, h, "systemctl is-enabled missing"); ok || !strings.Contains(out, "No such file or directory") {
		t.Errorf("is-enabled of a missing unit: %v %q", ok, out)
	}
}

// A started .path unit starts its service once the path exists, as
// Typhoon's kubelet.path starts the kubelet when the kubeconfig appears.
func TestPathUnitStartsItsService(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	mustSh(t, h, `printf '[Service]\nExecStart=/bin/sleep 1000\n' > /etc/systemd/system/watched.service
printf '[Path]\nPathExists=/etc/kubernetes/kubeconfig\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/watched.path
systemctl enable --now watched.path`)
	if out := mustSh(t, h, "systemctl is-active watched.path"); out != "active" {
		t.Fatalf("watched.path: %q", out)
	}
	time.Sleep(500 * time.Millisecond)
	if out, _ := hostSh(t, h, "systemctl is-active watched"); out != "inactive" {
		t.Fatalf("watched.service started before its path exists: %q", out)
	}
	mustSh(t, h, "mkdir -p /etc/kubernetes && echo x > /etc/kubernetes/kubeconfig")
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := hostSh(t, h, "systemctl is-active watched")
		if out == "active" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watched.service not started after its path appeared: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustSh(t, h, "systemctl stop watched.path watched")
}

// A restart is one job: the path unit that watches the service does not
// start it between the restart's stop and its start, so every restart
// succeeds and one main process runs (Typhoon's kubelet.path beside a
// kubelet-image-swap's restart).
func TestRestartIsOneJobBesideAPathUnit(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	mustSh(t, h, `mkdir -p /etc/kubernetes && echo x > /etc/kubernetes/kubeconfig
printf '[Service]\nExecStartPre=/bin/mkdir /run/slot\nExecStartPre=/bin/sleep 0.5\nExecStart=/bin/sleep 1001\nExecStopPost=/bin/rmdir /run/slot\n' > /etc/systemd/system/watched.service
printf '[Path]\nPathExists=/etc/kubernetes/kubeconfig\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/watched.path
systemctl enable --now watched.path`)
	deadline := time.Now().Add(5 * time.Second)
	for out, _ := hostSh(t, h, "systemctl is-active watched"); out != "active"; out, _ = hostSh(t, h, "systemctl is-active watched") {
		if time.Now().After(deadline) {
			t.Fatalf("watched.service not started by its path unit: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 5 {
		if out, ok := hostSh(t, h, "systemctl restart watched"); !ok {
			t.Errorf("restart %d: %s", i+1, out)
		}
	}
	time.Sleep(time.Second)
	if out := mustSh(t, h, "pgrep -cx -f '/bin/sleep 1001' || true"); out != "1" {
		t.Errorf("%s main processes after the restarts, want 1", out)
	}
	if out := mustSh(t, h, "systemctl is-active watched || true"); out != "active" {
		t.Errorf("watched.service after the restarts: %s", out)
	}
	mustSh(t, h, "systemctl stop watched.path watched")
}

// The container stand-in on a real host: images from the seeded store
// only, unknown flags refused, a container sees only its volumes, and a
// unit like the kubelet's runs a container and stops it.
func TestContainerStandInOnAHost(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	if err := h.AddImage(Image{Ref: "lab.example/sh:1", Entrypoint: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	mustSh(t, h, "docker pull quay.io/poseidon/kubelet:v1.35.4 && podman pull "+LabImages()[0].NameAtDigest())
	if out, ok := hostSh(t, h, "docker pull quay.io/other/kubelet:v1.35.4"); ok || !strings.Contains(out, "pull access denied") {
		t.Errorf("pull of an image nowhere: %v %q", ok, out)
	}
	if out, ok := hostSh(t, h, "docker run --rm quay.io/other/kubelet:v1.35.4; echo rc=$?"); !ok || !strings.Contains(out, "Unable to find image 'quay.io/other/kubelet:v1.35.4' locally") || !strings.HasSuffix(out, "rc=125") {
		t.Errorf("run of an image nowhere: %q", out)
	}
	if out, _ := hostSh(t, h, "docker run --rm --foo lab.example/sh:1; echo rc=$?"); !strings.Contains(out, "unknown flag: --foo") || !strings.HasSuffix(out, "rc=125") {
		t.Errorf("unknown flag: %q", out)
	}
	mustSh(t, h, "mkdir -p /etc/kubernetes /var/lib/kubelet && echo conf > /etc/kubernetes/kubelet.conf && echo state > /var/lib/kubelet/state")
	out := mustSh(t, h, `docker run --rm --privileged --pid host --network host -v /etc/kubernetes:/etc/kubernetes:ro lab.example/sh:1 -c '
cat /etc/kubernetes/kubelet.conf; for p in /var/lib/kubelet/state /etc/ssh /root/.ssh /etc/systemd; do [ -e $p ] && echo VISIBLE $p; done; true'`)
	if out != "conf" {
		t.Errorf("container saw %q, want only its volume", out)
	}
	// A kubelet-like unit: run in the foreground under systemctl, stopped
	// with docker stop, removed by --rm.
	mustSh(t, h, `printf '%s\n' '[Service]' 'ExecStartPre=-/usr/bin/podman rm --force boxed' \
  'ExecStart=/usr/bin/podman run --rm --name boxed --log-driver k8s-file --privileged --pid host --network host --volume /etc/kubernetes:/etc/kubernetes:ro,z --volume /var/lib/kubelet:/var/lib/kubelet:rshared,z lab.example/sh:1 -c "echo up; exec sleep 1000"' \
  'ExecStop=-/usr/bin/podman stop boxed' > /etc/systemd/system/boxed.service
systemctl daemon-reload && systemctl start boxed`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if out, _ := hostSh(t, h, "podman logs boxed"); out == "up" {
			break
		}
		if time.Now().After(deadline) {
			out, _ := hostSh(t, h, "podman ps -a; journalctl -u boxed")
			t.Fatalf("boxed did not come up: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustSh(t, h, "systemctl stop boxed")
	if out := mustSh(t, h, "podman ps -a -q"); out != "" {
		t.Errorf("containers left after stop: %q", out)
	}
	if data, err := h.ReadFile(ImageStore); err != nil || !strings.Contains(string(data), "quay.io/poseidon/kubelet:v1.35.4 sha256:") {
		t.Errorf("image store: %v %.200s", err, data)
	}
}

// An rshared volume, as the kubelet unit mounts /var/lib/kubelet: what the
// container mounts under it (the kubelet's pod volumes) appears on the
// host, for the runtime that starts the pods; what it mounts elsewhere
// does not. docker refuses an rshared volume whose source is on a mount
// that is not shared, as the real daemon does.
func TestContainerStandInSharesAnRsharedVolume(t *testing.T) {
	h := standinHost(t, "127.0.37.")
	if err := h.AddImage(Image{Ref: "lab.example/sh:1", Entrypoint: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	mustSh(t, h, "mkdir -p /var/lib/kubelet/pods/p1 /srv/other /srv/private && mount --bind /srv/private /srv/private && mount --make-private /srv/private")
	mustSh(t, h, `docker run --rm --privileged -v /var/lib/kubelet:/var/lib/kubelet:rshared -v /srv/other:/srv/other lab.example/sh:1 -c '
mount -t tmpfs tmpfs /var/lib/kubelet/pods/p1 && echo token > /var/lib/kubelet/pods/p1/token
mkdir -p /srv/other/x && mount -t tmpfs tmpfs /srv/other/x'`)
	if out := mustSh(t, h, "cat /var/lib/kubelet/pods/p1/token; grep -c ' /var/lib/kubelet/pods/p1 ' /proc/self/mountinfo"); out != "token\n1" {
		t.Errorf("the container's mount under the rshared volume, seen from the host: %q", out)
	}
	if out, _ := hostSh(t, h, "grep -c ' /srv/other/x ' /proc/self/mountinfo"); out != "0" {
		t.Errorf("a mount under a private volume reached the host: %q", out)
	}
	// A second container on the same volume (the kubelet restarted) sees
	// the pod's mount as it is, and starting it takes nothing from the
	// host: the pods keep the very mount the kubelet goes on writing to.
	if out := mustSh(t, h, `docker run --rm --privileged -v /var/lib/kubelet:/var/lib/kubelet:rshared lab.example/sh:1 -c '
cat /var/lib/kubelet/pods/p1/token; grep -c " /var/lib/kubelet/pods/p1 " /proc/self/mountinfo'`); out != "token\n1" {
		t.Errorf("a second container on the rshared volume saw %q, want the pod's mount", out)
	}
	if out, _ := hostSh(t, h, "cat /var/lib/kubelet/pods/p1/token; grep -c ' /var/lib/kubelet/pods/p1 ' /proc/self/mountinfo"); out != "token\n1" {
		t.Errorf("after a second container on the rshared volume, the host has: %q", out)
	}
	mustSh(t, h, "umount /var/lib/kubelet/pods/p1")
	if out, _ := hostSh(t, h, "docker run --rm -v /srv/private:/srv/private:rshared lab.example/sh:1 -c true; echo rc=$?"); !strings.Contains(out, "path /srv/private is mounted on /srv/private but it is not a shared mount") || !strings.HasSuffix(out, "rc=125") {
		t.Errorf("rshared volume on a private mount: %q", out)
	}
}

// The hosts share the machine's kernel: their modprobe and sysctl
// stand-ins check against it and record on the host alone. The machine's
// /proc/sys, /var/log and /var/lib are as they were.
func TestKernelStandInsRecordOnTheHostOnly(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	const watches = "/proc/sys/fs/inotify/max_user_watches"
	before, err := os.ReadFile(watches)
	if err != nil {
		t.Fatal(err)
	}
	other := "16184"
	if strings.TrimSpace(string(before)) == other {
		other = "16185"
	}
	if out := mustSh(t, h, "sysctl -w fs.inotify.max_user_watches="+other+" && sysctl -n fs.inotify.max_user_watches net.ipv4.conf.lo.rp_filter"); out != "fs.inotify.max_user_watches = "+other+"\n"+other+"\n"+strings.TrimSpace(readProc(t, "net/ipv4/conf/lo/rp_filter")) {
		t.Errorf("sysctl on the host: %q", out)
	}
	if out, ok := hostSh(t, h, "sysctl -w kedge.no.such.key=1"); ok || out != "sysctl: cannot stat /proc/sys/kedge/no/such/key: No such file or directory" {
		t.Errorf("an unknown key: %v %q", ok, out)
	}
	if out := mustSh(t, h, "modprobe -- nf_conntrack && cut -d' ' -f2- /var/log/kedge-lab/modprobe.log"); !strings.HasPrefix(out, "nf_conntrack ") {
		t.Errorf("modprobe on the host: %q", out)
	}
	if out, ok := hostSh(t, h, "modprobe kedge_no_such_module"); ok || !strings.HasPrefix(out, "modprobe: FATAL: Module kedge_no_such_module not found in directory /lib/modules/") {
		t.Errorf("an unknown module: %v %q", ok, out)
	}
	if after, err := os.ReadFile(watches); err != nil || string(after) != string(before) {
		t.Errorf("the machine's %s: %q (%v), was %q", watches, after, err, before)
	}
	for _, f := range []string{"/var/lib/kedge-lab/sysctl.conf", "/var/log/kedge-lab/modprobe.log"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("the machine has %s", f)
		}
		if _, err := h.ReadFile(f); err != nil {
			t.Errorf("the host has no %s: %v", f, err)
		}
	}
}

func readProc(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + key)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A boot starts its units as systemd runs a boot's start jobs: a unit
// slow to start (a long ExecStartPre) holds up the units ordered after it
// (After=, or its Before=; a path unit as the service it starts) and no
// other, as a controller's slow etcd member does not hold up the kubelet
// its kubelet.path starts.
func TestBootStartsUnitsInTheirOrder(t *testing.T) {
	h := standinHost(t, "127.0.36.")
	record := func(name string) string {
		return `ExecStart=/etc/record-start ` + name + `\n`
	}
	mustSh(t, h, `set -e
mkdir -p /etc/kubernetes && echo x > /etc/kubernetes/kubeconfig
printf '#!/bin/sh\ndate +%%s%%N > /var/lib/boot-order/$1\nexec sleep 1000\n' > /etc/record-start && chmod 755 /etc/record-start
d=/etc/systemd/system
printf '[Service]\nExecStartPre=/bin/sleep 2\n`+record("slow")+`[Install]\nWantedBy=multi-user.target\n' > $d/slow.service
printf '[Service]\n`+record("free")+`[Install]\nWantedBy=multi-user.target\n' > $d/free.service
printf '[Unit]\nAfter=network.target slow.service\n[Service]\n`+record("after")+`[Install]\nWantedBy=multi-user.target\n' > $d/after.service
printf '[Unit]\nBefore=watched.service\n[Service]\nExecStartPre=/bin/sleep 1\n`+record("early")+`[Install]\nWantedBy=multi-user.target\n' > $d/early.service
printf '[Service]\n`+record("watched")+`' > $d/watched.service
printf '[Path]\nPathExists=/etc/kubernetes/kubeconfig\n[Install]\nWantedBy=multi-user.target\n' > $d/watched.path
printf '[Service]\n`+record("freewatched")+`' > $d/freewatched.service
printf '[Path]\nPathExists=/etc/kubernetes/kubeconfig\n[Install]\nWantedBy=multi-user.target\n' > $d/freewatched.path
systemctl enable slow free after early watched.path freewatched.path`)
	mustSh(t, h, "rm -rf /var/lib/boot-order && mkdir -p /var/lib/boot-order")
	if err := h.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	started := map[string]int64{}
	deadline := time.Now().Add(10 * time.Second)
	for _, u := range []string{"slow", "free", "after", "early", "watched", "freewatched"} {
		for {
			out, _ := hostSh(t, h, "cat /var/lib/boot-order/"+u)
			if n, err := strconv.ParseInt(out, 10, 64); err == nil {
				started[u] = n
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start at boot", u)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ms := func(a, b string) int64 { return (started[a] - started[b]) / 1e6 }
	if d := ms("slow", "free"); d < 1500 {
		t.Errorf("free.service started %d ms before slow.service's main process: it waited for slow's ExecStartPre", d)
	}
	if d := ms("slow", "freewatched"); d < 1500 {
		t.Errorf("freewatched.service (started by freewatched.path) started %d ms before slow.service's main process: it waited for slow's ExecStartPre", d)
	}
	if d := ms("after", "slow"); d < 0 {
		t.Errorf("after.service (After=slow.service) started %d ms before slow.service", -d)
	}
	if d := ms("watched", "early"); d < 0 {
		t.Errorf("watched.service (early.service is Before= it; started by watched.path) started %d ms before early.service", -d)
	}
	mustSh(t, h, "systemctl stop watched.path freewatched.path watched freewatched slow free after early")
}
