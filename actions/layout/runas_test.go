package layout

import (
	"fmt"
	"io/fs"
	"reflect"
	"testing"
)

// runAsFiles is a host's files for readRunAs.
type runAsFiles map[string]string

func (m runAsFiles) ReadFile(p string) ([]byte, error) {
	if s, ok := m[p]; ok {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
}

func (m runAsFiles) ReadDir(string) ([]string, error) { return nil, fs.ErrNotExist }

// A control plane that runs as nobody (as Typhoon's does), one container
// overriding its pod, one pod with nothing set.
const (
	apiserverAsNobody = `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  hostNetwork: true
  securityContext:
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.35.4
    command:
    - kube-apiserver
    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key
`
	schedulerOwnGroup = `apiVersion: v1
kind: Pod
metadata: {name: kube-scheduler, namespace: kube-system}
spec:
  securityContext: {runAsUser: 65534, runAsGroup: 65534, supplementalGroups: [1000, 1001]}
  containers:
  - name: sidecar
    image: busybox
    command: [sleep, infinity]
  - name: kube-scheduler
    image: registry.k8s.io/kube-scheduler:v1.35.4
    command: [/usr/local/bin/kube-scheduler]
    args: [--kubeconfig=/etc/kubernetes/pki/scheduler.conf]
    securityContext: {runAsUser: 2000, runAsGroup: 3000}
`
	controllerManagerAsRoot = `apiVersion: v1
kind: Pod
metadata: {name: kube-controller-manager, namespace: kube-system}
spec:
  containers:
  - name: kube-controller-manager
    image: registry.k8s.io/kube-controller-manager:v1.35.4
    command: [kube-controller-manager, --kubeconfig=/etc/kubernetes/pki/controller-manager.conf]
`
	etcdMemberDocker = `[Service]
Environment=ETCD_IMAGE=quay.io/coreos/etcd:v3.6.4
ExecStartPre=/usr/bin/docker run -d \
    --name etcd \
    --network host \
    --env-file /etc/etcd/etcd.env \
    --user 232:232 \
    --volume /etc/ssl/etcd:/etc/ssl/certs:ro \
    ${ETCD_IMAGE}
ExecStart=docker logs -f etcd
`
	etcdMemberPodman = `[Service]
Environment=ETCD_IMAGE=quay.io/coreos/etcd:v3.6.4
ExecStart=/usr/bin/podman run --name etcd \
    --env-file /etc/etcd/etcd.env \
    --network host \
    --volume /etc/ssl/etcd:/etc/ssl/certs:ro,Z \
    ${ETCD_IMAGE}
`
)

func TestRunAsFromSecurityContextAndEtcdUnit(t *testing.T) {
	m := runAsFiles{
		"/etc/kubernetes/manifests/kube-apiserver.yaml":          apiserverAsNobody,
		"/etc/kubernetes/manifests/kube-scheduler.yaml":          schedulerOwnGroup,
		"/etc/kubernetes/manifests/kube-controller-manager.yaml": controllerManagerAsRoot,
		"/etc/systemd/system/etcd-member.service":                etcdMemberDocker,
	}
	l := Layout{Etcd: Etcd{Mode: EtcdHostUnit}, StaticPods: map[string]string{
		"kube-apiserver":          "/etc/kubernetes/manifests/kube-apiserver.yaml",
		"kube-scheduler":          "/etc/kubernetes/manifests/kube-scheduler.yaml",
		"kube-controller-manager": "/etc/kubernetes/manifests/kube-controller-manager.yaml",
	}}
	es := UnitState{LoadState: "loaded", FragmentPath: "/etc/systemd/system/etcd-member.service"}
	if err := readRunAs(&l, es, m); err != nil {
		t.Fatal(err)
	}
	want := map[string]RunAs{
		"kube-apiserver":          {User: "65534", From: "/etc/kubernetes/manifests/kube-apiserver.yaml: securityContext"},
		"kube-scheduler":          {User: "2000", Group: "3000", Groups: []string{"1000", "1001"}, From: "/etc/kubernetes/manifests/kube-scheduler.yaml: securityContext"},
		"kube-controller-manager": {User: "0", Group: "0", From: "/etc/kubernetes/manifests/kube-controller-manager.yaml: no runAsUser (root)"},
		"etcd":                    {User: "232", Group: "232", From: "etcd-member.service: docker run --user 232:232"},
		"kubelet":                 {User: "0", Group: "0", From: "the kubelet runs as root"},
	}
	if !reflect.DeepEqual(l.RunAs, want) {
		t.Errorf("runAs:\n got %+v\nwant %+v", l.RunAs, want)
	}

	// podman with no --user: the unit's User= and Group=, else root.
	m["/etc/systemd/system/etcd-member.service"] = etcdMemberPodman
	m["/etc/systemd/system/etcd-member.service.d/10-user.conf"] = "[Service]\nUser=etcd\nGroup=etcd\n"
	es.DropInPaths = []string{"/etc/systemd/system/etcd-member.service.d/10-user.conf"}
	if err := readRunAs(&l, es, m); err != nil {
		t.Fatal(err)
	}
	if got, want := l.RunAs["etcd"], (RunAs{User: "etcd", Group: "etcd", From: "etcd-member.service: User=etcd Group=etcd"}); !reflect.DeepEqual(got, want) {
		t.Errorf("etcd with User=: %+v, want %+v", got, want)
	}
	es.DropInPaths = nil
	if err := readRunAs(&l, es, m); err != nil {
		t.Fatal(err)
	}
	if got := l.RunAs["etcd"]; got.User != "0" || got.From != "etcd-member.service: no --user nor User= (root)" {
		t.Errorf("etcd as the image's user: %+v", got)
	}
}

func TestDocumentedModes(t *testing.T) {
	for _, c := range []struct {
		kind, path  string
		secret      bool
		mode, owner string
	}{
		{KindTyphoonFlatcar, "/etc/kubernetes/pki/apiserver.key", true, "0644", "root:root"},
		{KindTyphoonFCOS, "/etc/kubernetes/pki/controller-manager.conf", true, "0644", "root:root"},
		{KindTyphoonFlatcar, "/etc/ssl/etcd/etcd/server.key", true, "0500", "etcd:etcd"},
		{KindTyphoonFCOS, "/etc/ssl/etcd/etcd/peer.crt", false, "0500", "etcd:etcd"},
		{KindKedge, "/etc/kubernetes/pki/apiserver.key", true, "0600", "root:root"},
		{KindKedge, "/etc/kubernetes/pki/apiserver.crt", false, "0644", "root:root"},
		{"", "/etc/ssl/etcd/etcd/server.key", true, "0600", "root:root"},
	} {
		if mode, owner := Documented(c.kind, c.path, c.secret); mode != c.mode || owner != c.owner {
			t.Errorf("Documented(%s, %s, %v) = %s %s, want %s %s", c.kind, c.path, c.secret, mode, owner, c.mode, c.owner)
		}
	}
}
