package typhoon

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

// Flavors.
const (
	Flatcar = "flatcar"
	FCOS    = "fcos"
)

// Typhoon's defaults.
const (
	ClusterDNS  = "10.3.0.10"
	ServiceCIDR = "10.3.0.0/16"
	PodCIDR     = "10.2.0.0/16"
)

// Where Typhoon keeps things on a host.
const (
	UnitDir             = "/etc/systemd/system"
	KubeletUnit         = UnitDir + "/kubelet.service"
	KubeletPathUnit     = UnitDir + "/kubelet.path"
	EtcdUnit            = UnitDir + "/etcd-member.service"
	EtcdEnv             = "/etc/etcd/etcd.env"
	KubeletConfig       = "/etc/kubernetes/kubelet.yaml"
	BootstrapKubeconfig = "/etc/kubernetes/kubeconfig"
	KubeletKubeconfig   = "/var/lib/kubelet/kubeconfig"
	ManifestsDir        = "/etc/kubernetes/manifests"
	PKIDir              = "/etc/kubernetes/pki"
	EtcdPKIDir          = "/etc/ssl/etcd/etcd"
)

// Node is one Typhoon host.
type Node struct {
	Flavor     string // Flatcar or FCOS
	Controller bool
	// DomainName is the host's name and its Node's (--hostname-override).
	DomainName   string
	KubeletImage string
	// Controllers only.
	EtcdName           string
	EtcdImage          string
	EtcdInitialCluster string // name=https://domain:2380,...
	// Workers only.
	NodeLabels []string
	NodeTaints []string
	// ClusterDNS defaults to Typhoon's 10.3.0.10.
	ClusterDNS string
	// ListenIP, when set, is where etcd listens instead of 0.0.0.0: the
	// test world's hosts share one network namespace, so each member
	// listens on its host's own address.
	ListenIP string
}

// File is one file to write on a host.
type File struct {
	Path string
	Mode uint32
	Data []byte
}

// Files are the host files of n that do not hold secrets: units, the
// kubelet's configuration, etcd's environment.
func Files(n Node) ([]File, error) {
	if n.Flavor != Flatcar && n.Flavor != FCOS {
		return nil, fmt.Errorf("typhoon: flavor %q", n.Flavor)
	}
	if n.ClusterDNS == "" {
		n.ClusterDNS = ClusterDNS
	}
	var files []File
	add := func(path string, mode uint32, tmpl *template.Template) error {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, n); err != nil {
			return fmt.Errorf("typhoon: %s: %w", path, err)
		}
		files = append(files, File{Path: path, Mode: mode, Data: b.Bytes()})
		return nil
	}
	unit := flatcarKubelet
	if n.Flavor == FCOS {
		unit = fcosKubelet
	}
	if err := add(KubeletUnit, 0o644, unit); err != nil {
		return nil, err
	}
	if err := add(KubeletPathUnit, 0o644, kubeletPath); err != nil {
		return nil, err
	}
	if err := add(KubeletConfig, 0o644, kubeletConfig); err != nil {
		return nil, err
	}
	if n.Controller {
		etcd := flatcarEtcd
		if n.Flavor == FCOS {
			etcd = fcosEtcd
		}
		if err := add(EtcdUnit, 0o644, etcd); err != nil {
			return nil, err
		}
		if err := add(EtcdEnv, 0o644, etcdEnv); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func parse(name, text string) *template.Template {
	return template.Must(template.New(name).Funcs(template.FuncMap{"join": strings.Join}).Parse(text))
}

// The kubelet's arguments, the same in both flavours.
const kubeletArgs = `    --bootstrap-kubeconfig=/etc/kubernetes/kubeconfig \
    --config=/etc/kubernetes/kubelet.yaml \
    --container-runtime-endpoint=unix:///run/containerd/containerd.sock \
    --hostname-override={{.DomainName}} \
    --kubeconfig=/var/lib/kubelet/kubeconfig \
{{- if .Controller}}
    --node-labels=node.kubernetes.io/controller="true" \
    --register-with-taints=node-role.kubernetes.io/controller=:NoSchedule
{{- else}}
{{- range .NodeLabels}}
    --node-labels={{.}} \
{{- end}}
{{- range .NodeTaints}}
    --register-with-taints={{.}} \
{{- end}}
    --node-labels=node.kubernetes.io/node
{{- end}}
`

// Before the kubelet: its directories, and the cluster CA taken out of
// the bootstrap kubeconfig for the kubelet's clientCAFile.
const kubeletPre = `ExecStartPre=/bin/mkdir -p /etc/cni/net.d
ExecStartPre=/bin/mkdir -p /etc/kubernetes/manifests
ExecStartPre=/bin/mkdir -p /opt/cni/bin
ExecStartPre=/bin/mkdir -p /var/lib/kubelet/volumeplugins
ExecStartPre=/usr/bin/bash -c "grep 'certificate-authority-data' /etc/kubernetes/kubeconfig | awk '{print $2}' | base64 -d > /etc/kubernetes/ca.crt"
`

var flatcarKubelet = parse("flatcar-kubelet", `[Unit]
Description=Kubelet (Typhoon layout, Flatcar Linux)
Requires=docker.service
After=docker.service
Wants=rpc-statd.service
[Service]
Environment=KUBELET_IMAGE={{.KubeletImage}}
`+kubeletPre+`ExecStartPre=/usr/bin/docker run -d \
    --name kubelet \
    --privileged \
    --pid host \
    --network host \
    -v /etc/cni/net.d:/etc/cni/net.d:ro \
    -v /etc/kubernetes:/etc/kubernetes:ro \
    -v /etc/machine-id:/etc/machine-id:ro \
    -v /usr/lib/os-release:/etc/os-release:ro \
    -v /lib/modules:/lib/modules:ro \
    -v /run:/run \
    -v /sys/fs/cgroup:/sys/fs/cgroup \
    -v /var/lib/containerd:/var/lib/containerd \
    -v /var/lib/kubelet:/var/lib/kubelet:rshared \
    -v /var/log:/var/log \
    -v /opt/cni/bin:/opt/cni/bin \
    ${KUBELET_IMAGE} \
`+kubeletArgs+`ExecStart=docker logs -f kubelet
ExecStop=docker stop kubelet
ExecStopPost=docker rm kubelet
Restart=always
RestartSec=10
[Install]
WantedBy=multi-user.target
`)

// Typhoon's Fedora CoreOS unit also mounts /etc/selinux and
// /sys/fs/selinux; the test machine has no SELinux, so they are left out
// (podman refuses a volume whose source does not exist).
var fcosKubelet = parse("fcos-kubelet", `[Unit]
Description=Kubelet (Typhoon layout, Fedora CoreOS)
Wants=rpc-statd.service
[Service]
Environment=KUBELET_IMAGE={{.KubeletImage}}
`+kubeletPre+`ExecStartPre=-/usr/bin/podman rm kubelet
ExecStart=/usr/bin/podman run --name kubelet \
    --log-driver k8s-file \
    --privileged \
    --pid host \
    --network host \
    --volume /etc/cni/net.d:/etc/cni/net.d:ro,z \
    --volume /etc/kubernetes:/etc/kubernetes:ro,z \
    --volume /usr/lib/os-release:/etc/os-release:ro \
    --volume /etc/machine-id:/etc/machine-id:ro \
    --volume /lib/modules:/lib/modules:ro \
    --volume /run:/run \
    --volume /sys/fs/cgroup:/sys/fs/cgroup \
    --volume /var/lib/containerd:/var/lib/containerd \
    --volume /var/lib/kubelet:/var/lib/kubelet:rshared,z \
    --volume /var/log:/var/log \
    --volume /var/run/lock:/var/run/lock:z \
    --volume /opt/cni/bin:/opt/cni/bin:z \
    ${KUBELET_IMAGE} \
`+kubeletArgs+`ExecStop=-/usr/bin/podman stop kubelet
Delegate=yes
Restart=always
RestartSec=10
[Install]
WantedBy=multi-user.target
`)

var kubeletPath = parse("kubelet-path", `[Unit]
Description=Start the kubelet once its bootstrap kubeconfig is there
[Path]
PathExists=/etc/kubernetes/kubeconfig
[Install]
WantedBy=multi-user.target
`)

var kubeletConfig = parse("kubelet-config", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
  - {{.ClusterDNS}}
clusterDomain: cluster.local
healthzPort: 0
rotateCertificates: true
serializeImagePulls: false
shutdownGracePeriod: 45s
shutdownGracePeriodCriticalPods: 30s
staticPodPath: /etc/kubernetes/manifests
readOnlyPort: 0
resolvConf: /run/systemd/resolve/resolv.conf
volumePluginDir: /var/lib/kubelet/volumeplugins
`)

var flatcarEtcd = parse("flatcar-etcd", `[Unit]
Description=etcd (Typhoon layout, Flatcar Linux)
Requires=docker.service
After=docker.service
[Service]
Environment=ETCD_IMAGE={{.EtcdImage}}
ExecStartPre=/usr/bin/docker run -d \
    --name etcd \
    --network host \
    --env-file /etc/etcd/etcd.env \
    --user 232:232 \
    --volume /etc/ssl/etcd:/etc/ssl/certs:ro \
    --volume /var/lib/etcd:/var/lib/etcd:rw \
    ${ETCD_IMAGE}
ExecStart=docker logs -f etcd
ExecStop=docker stop etcd
ExecStopPost=docker rm etcd
Restart=always
RestartSec=10s
TimeoutStartSec=0
LimitNOFILE=40000
[Install]
WantedBy=multi-user.target
`)

var fcosEtcd = parse("fcos-etcd", `[Unit]
Description=etcd (Typhoon layout, Fedora CoreOS)
Wants=network-online.target
After=network-online.target
[Service]
Environment=ETCD_IMAGE={{.EtcdImage}}
Type=exec
ExecStartPre=/bin/mkdir -p /var/lib/etcd
ExecStartPre=-/usr/bin/podman rm etcd
ExecStart=/usr/bin/podman run --name etcd \
    --env-file /etc/etcd/etcd.env \
    --log-driver k8s-file \
    --network host \
    --volume /var/lib/etcd:/var/lib/etcd:rw,Z \
    --volume /etc/ssl/etcd:/etc/ssl/certs:ro,Z \
    ${ETCD_IMAGE}
ExecStop=/usr/bin/podman stop etcd
Restart=on-failure
RestartSec=10s
TimeoutStartSec=0
LimitNOFILE=40000
[Install]
WantedBy=multi-user.target
`)

var etcdEnv = parse("etcd-env", `ETCD_NAME={{.EtcdName}}
ETCD_DATA_DIR=/var/lib/etcd
ETCD_ADVERTISE_CLIENT_URLS=https://{{.DomainName}}:2379
ETCD_INITIAL_ADVERTISE_PEER_URLS=https://{{.DomainName}}:2380
ETCD_LISTEN_CLIENT_URLS=https://{{or .ListenIP "0.0.0.0"}}:2379
ETCD_LISTEN_PEER_URLS=https://{{or .ListenIP "0.0.0.0"}}:2380
ETCD_LISTEN_METRICS_URLS=http://{{or .ListenIP "0.0.0.0"}}:2381
ETCD_INITIAL_CLUSTER={{.EtcdInitialCluster}}
ETCD_STRICT_RECONFIG_CHECK=true
ETCD_TRUSTED_CA_FILE=/etc/ssl/certs/etcd/server-ca.crt
ETCD_CERT_FILE=/etc/ssl/certs/etcd/server.crt
ETCD_KEY_FILE=/etc/ssl/certs/etcd/server.key
ETCD_CLIENT_CERT_AUTH=true
ETCD_PEER_TRUSTED_CA_FILE=/etc/ssl/certs/etcd/peer-ca.crt
ETCD_PEER_CERT_FILE=/etc/ssl/certs/etcd/peer.crt
ETCD_PEER_KEY_FILE=/etc/ssl/certs/etcd/peer.key
ETCD_PEER_CLIENT_CERT_AUTH=true
`)
