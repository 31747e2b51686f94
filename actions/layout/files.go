package layout

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubeletConfig holds the KubeletConfiguration fields Discover reports.
type kubeletConfig struct {
	ClusterDNS     []string `json:"clusterDNS"`
	ClusterDomain  string   `json:"clusterDomain"`
	StaticPodPath  string   `json:"staticPodPath"`
	TLSCertFile    string   `json:"tlsCertFile"`
	TLSKeyFile     string   `json:"tlsPrivateKeyFile"`
	Authentication struct {
		X509 struct {
			ClientCAFile string `json:"clientCAFile"`
		} `json:"x509"`
	} `json:"authentication"`
}

// readKubeletFiles reads the kubelet's configuration (and its --config-dir
// drop-ins, in name order, as the kubelet merges them) and its
// kubeconfig, through the container's volumes.
func readKubeletFiles(l *Layout, r Reader) error {
	k := l.Kubelet
	host := func(flag string) (string, error) {
		v := flagValue(k.Args, flag)
		if v == "" {
			return "", nil
		}
		p, ok := hostPath(k.Volumes, v)
		if !ok {
			return "", fmt.Errorf("the kubelet's --%s=%s is not on a volume of its container", flag, v)
		}
		return p, nil
	}
	var err error
	if k.Config, err = host("config"); err != nil {
		return err
	}
	if k.ConfigDir, err = host("config-dir"); err != nil {
		return err
	}
	if k.Kubeconfig, err = host("kubeconfig"); err != nil {
		return err
	}
	if k.BootstrapKubeconfig, err = host("bootstrap-kubeconfig"); err != nil {
		return err
	}
	if k.Config == "" {
		return fmt.Errorf("the kubelet has no --config: Kedge reads its settings from a KubeletConfiguration file")
	}
	l.Files[FileKubeletConfig] = k.Config
	var cfg kubeletConfig
	b, err := r.ReadFile(k.Config)
	if err != nil {
		return fmt.Errorf("kubelet --config: %w", err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", k.Config, err)
	}
	if k.ConfigDir != "" {
		names, err := r.ReadDir(k.ConfigDir)
		if err != nil && !isNotExist(err) {
			return err
		}
		slices.Sort(names)
		for _, n := range names {
			if !strings.HasSuffix(n, ".conf") {
				continue
			}
			p := path.Join(k.ConfigDir, n)
			k.ConfigDropIns = append(k.ConfigDropIns, p)
			b, err := r.ReadFile(p)
			if err != nil {
				return err
			}
			var d kubeletConfig
			if err := yaml.Unmarshal(b, &d); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if d.ClusterDNS != nil {
				cfg.ClusterDNS = d.ClusterDNS
			}
			if d.ClusterDomain != "" {
				cfg.ClusterDomain = d.ClusterDomain
			}
			if d.StaticPodPath != "" {
				cfg.StaticPodPath = d.StaticPodPath
			}
			if d.TLSCertFile != "" {
				cfg.TLSCertFile, cfg.TLSKeyFile = d.TLSCertFile, d.TLSKeyFile
			}
			if d.Authentication.X509.ClientCAFile != "" {
				cfg.Authentication.X509.ClientCAFile = d.Authentication.X509.ClientCAFile
			}
		}
	}
	l.ClusterDNS, l.ClusterDomain = cfg.ClusterDNS, cfg.ClusterDomain
	if p := cfg.Authentication.X509.ClientCAFile; p != "" {
		if k.ClientCAFile, err = mapped(k.Volumes, "clientCAFile", p); err != nil {
			return err
		}
		l.Files[FileKubeletClientCA] = k.ClientCAFile
	}
	if p := cfg.StaticPodPath; p != "" {
		if k.StaticPodPath, err = mapped(k.Volumes, "staticPodPath", p); err != nil {
			return err
		}
	}
	servingFiles(l, cfg)
	if k.BootstrapKubeconfig != "" {
		l.Files[FileBootstrapKubecfg] = k.BootstrapKubeconfig
	}
	if k.Kubeconfig != "" {
		l.Files[FileKubeletKubecfg] = k.Kubeconfig
		b, err := r.ReadFile(k.Kubeconfig)
		switch {
		case isNotExist(err):
			// Not bootstrapped yet.
		case err != nil:
			return err
		default:
			cert, err := kubeconfigClientCert(b)
			if err != nil {
				return fmt.Errorf("%s: %w", k.Kubeconfig, err)
			}
			if cert != "" {
				if !path.IsAbs(cert) {
					cert = path.Join(path.Dir(flagValue(k.Args, "kubeconfig")), cert)
				}
				if k.ClientCertificate, err = mapped(k.Volumes, "client-certificate", cert); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// defaultKubeletCertDir is the kubelet's --cert-dir when not given.
const defaultKubeletCertDir = "/var/lib/kubelet/pki"

// servingFiles names the kubelet's serving certificate and key on the
// host: its tlsCertFile and tlsPrivateKeyFile, or kubelet.crt and .key
// in its --cert-dir, which it makes self-signed when they are missing;
// and its client certificate store in that directory. Files off the
// kubelet's volumes are left unnamed.
func servingFiles(l *Layout, cfg kubeletConfig) {
	k := l.Kubelet
	dir := flagValue(k.Args, "cert-dir")
	if dir == "" {
		dir = defaultKubeletCertDir
	}
	cert, key := cfg.TLSCertFile, cfg.TLSKeyFile
	if cert == "" || key == "" {
		cert, key = path.Join(dir, "kubelet.crt"), path.Join(dir, "kubelet.key")
	}
	c, okc := hostPath(k.Volumes, cert)
	kp, okk := hostPath(k.Volumes, key)
	if okc && okk {
		l.Files[FileKubeletServingCert], l.Files[FileKubeletServingKey] = c, kp
	}
	if p, ok := hostPath(k.Volumes, path.Join(dir, "kubelet-client-current.pem")); ok {
		l.Files[FileKubeletClientCurrent] = p
	}
}

func mapped(volumes map[string]string, what, p string) (string, error) {
	h, ok := hostPath(volumes, p)
	if !ok {
		return "", fmt.Errorf("the kubelet's %s %s is not on a volume of its container", what, p)
	}
	return h, nil
}

// kubeconfigClientCert returns the client-certificate file the
// kubeconfig's first user references ("" when the certificate is
// embedded or there is none).
func kubeconfigClientCert(b []byte) (string, error) {
	var kc struct {
		Users []struct {
			User struct {
				ClientCertificate string `json:"client-certificate"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return "", err
	}
	if len(kc.Users) == 0 {
		return "", nil
	}
	return kc.Users[0].User.ClientCertificate, nil
}

// staticPod is the part of a Pod manifest Discover reads.
type staticPod struct {
	Spec struct {
		Containers []struct {
			Name         string   `json:"name"`
			Image        string   `json:"image"`
			Command      []string `json:"command"`
			Args         []string `json:"args"`
			VolumeMounts []struct {
				Name      string `json:"name"`
				MountPath string `json:"mountPath"`
			} `json:"volumeMounts"`
		} `json:"containers"`
		Volumes []struct {
			Name     string `json:"name"`
			HostPath *struct {
				Path string `json:"path"`
			} `json:"hostPath"`
		} `json:"volumes"`
	} `json:"spec"`
}

var components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// Which flag of which component names which file.
var componentFiles = map[string]map[string]string{
	"kube-apiserver": {
		"client-ca-file": FileClusterCA, "tls-cert-file": FileAPIServerCert, "tls-private-key-file": FileAPIServerKey,
		"service-account-key-file": FileServiceAccountP, "service-account-signing-key-file": FileServiceAccountK,
		"etcd-cafile": FileEtcdClientCA, "etcd-certfile": FileEtcdClientCert, "etcd-keyfile": FileEtcdClientKey,
		"kubelet-client-certificate": FileAPIServerKubeletCert, "kubelet-client-key": FileAPIServerKubeletKey,
		"requestheader-client-ca-file": FileAggregationCA, "proxy-client-cert-file": FileAggregationCert,
		"proxy-client-key-file": FileAggregationKey,
	},
	"kube-controller-manager": {
		"cluster-signing-key-file": FileClusterCAKey, "service-account-private-key-file": FileServiceAccountK,
		"kubeconfig": FileControllerManagerKC, "cluster-signing-cert-file": FileClusterSigner,
		"root-ca-file": FileRootCA, "client-ca-file": FileControllerManagerCA,
	},
	"kube-scheduler": {
		"kubeconfig": FileSchedulerKC,
	},
	"etcd": {
		"trusted-ca-file": FileEtcdServerCA, "cert-file": FileEtcdServerCert, "key-file": FileEtcdServerKey,
		"peer-trusted-ca-file": FileEtcdPeerCA, "peer-cert-file": FileEtcdPeerCert, "peer-key-file": FileEtcdPeerKey,
	},
}

// readStaticPods finds the control plane's static pods and the files
// their flags name, through the pods' hostPath volumes.
func readStaticPods(l *Layout, r Reader) error {
	dir := l.Kubelet.StaticPodPath
	if dir == "" {
		return nil
	}
	names, err := r.ReadDir(dir)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json")) {
			continue
		}
		p := path.Join(dir, n)
		b, err := r.ReadFile(p)
		if err != nil {
			return err
		}
		var pod staticPod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		hostPaths := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				hostPaths[v.Name] = v.HostPath.Path
			}
		}
		for _, c := range pod.Spec.Containers {
			cmd := append(append([]string(nil), c.Command...), c.Args...)
			if len(cmd) == 0 {
				continue
			}
			comp := path.Base(cmd[0])
			if !slices.Contains(components, comp) {
				continue
			}
			if l.StaticPods == nil {
				l.StaticPods = map[string]string{}
			}
			l.StaticPods[comp] = p
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				if hp, ok := hostPaths[m.Name]; ok {
					mounts[path.Clean(m.MountPath)] = path.Clean(hp)
				}
			}
			args := cmd[1:]
			for flag, file := range componentFiles[comp] {
				v := flagValue(args, flag)
				if v == "" {
					continue
				}
				h, ok := hostPath(mounts, v)
				if !ok {
					return fmt.Errorf("%s: %s's --%s=%s is not on a hostPath volume", p, comp, flag, v)
				}
				if _, set := l.Files[file]; !set || comp == "kube-apiserver" {
					l.Files[file] = h
				}
			}
			if comp == "etcd" {
				l.Etcd = Etcd{Mode: EtcdStaticPod, Manifest: p, Name: flagValue(args, "name"), Image: c.Image,
					InitialCluster: parseMembers(flagValue(args, "initial-cluster")),
					ClientURLs:     splitList(flagValue(args, "advertise-client-urls"))}
				if d := flagValue(args, "data-dir"); d != "" {
					l.Etcd.DataDir, _ = hostPath(mounts, d)
				}
			}
		}
	}
	return nil
}

// readEtcdUnit reads etcd-member.service: its container's environment
// file and volumes.
func readEtcdUnit(l *Layout, es UnitState, r Reader) error {
	files := append([]string{es.FragmentPath}, es.DropInPaths...)
	var contents [][]byte
	for _, p := range files {
		b, err := r.ReadFile(p)
		if err != nil {
			return fmt.Errorf("etcd-member.service: %w", err)
		}
		contents = append(contents, b)
	}
	u, err := ParseUnit(files, contents)
	if err != nil {
		return fmt.Errorf("etcd-member.service: %w", err)
	}
	var run runCommand
	found := false
	for _, line := range append(append([]string(nil), u.ExecStartPre...), u.ExecStart...) {
		words, err := Command(line)
		if err != nil {
			return fmt.Errorf("etcd-member.service: %w", err)
		}
		if len(words) < 2 || words[1] != "run" {
			continue
		}
		if rt := path.Base(words[0]); rt == "docker" || rt == "podman" {
			if run, err = parseRun(rt, words[2:]); err != nil {
				return fmt.Errorf("etcd-member.service: %s run: %w", rt, err)
			}
			found = true
			break
		}
	}
	if !found || len(run.envFiles) != 1 {
		return fmt.Errorf("etcd-member.service does not run etcd's container with one --env-file")
	}
	envFile := run.envFiles[0]
	b, err := r.ReadFile(envFile)
	if err != nil {
		return fmt.Errorf("etcd-member.service: %w", err)
	}
	env := parseEnvFile(b)
	l.Etcd = Etcd{Mode: EtcdHostUnit, Unit: EtcdMember, EnvFile: envFile, Name: env["ETCD_NAME"],
		InitialCluster: parseMembers(env["ETCD_INITIAL_CLUSTER"]), ClientURLs: splitList(env["ETCD_ADVERTISE_CLIENT_URLS"])}
	l.Etcd.Runtime = run.runtime
	etcdImage(&l.Etcd, u, es, run.image)
	if d := env["ETCD_DATA_DIR"]; d != "" {
		l.Etcd.DataDir, _ = hostPath(run.volumes, d)
	}
	for v, file := range map[string]string{
		"ETCD_TRUSTED_CA_FILE": FileEtcdServerCA, "ETCD_CERT_FILE": FileEtcdServerCert, "ETCD_KEY_FILE": FileEtcdServerKey,
		"ETCD_PEER_TRUSTED_CA_FILE": FileEtcdPeerCA, "ETCD_PEER_CERT_FILE": FileEtcdPeerCert, "ETCD_PEER_KEY_FILE": FileEtcdPeerKey,
	} {
		if env[v] == "" {
			continue
		}
		h, ok := hostPath(run.volumes, env[v])
		if !ok {
			return fmt.Errorf("%s: %s=%s is not on a volume of etcd's container", envFile, v, env[v])
		}
		l.Files[file] = h
	}
	return nil
}

// parseEnvFile reads KEY=VALUE lines as docker's and podman's --env-file
// do (no quoting, # comments).
func parseEnvFile(b []byte) map[string]string {
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func parseMembers(s string) []Member {
	var ms []Member
	for _, m := range splitList(s) {
		if name, url, ok := strings.Cut(m, "="); ok {
			ms = append(ms, Member{Name: name, PeerURL: url})
		}
	}
	return ms
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// etcdImage reads the image of etcd-member.service's container: its run
// command must name it as ${ETCD_IMAGE}, which the unit's files set
// (the loaded unit's environment says what systemd uses now).
func etcdImage(e *Etcd, u Unit, es UnitState, runImage string) {
	e.Image, e.ImageFrom = u.Environment[EtcdImageVariable], u.EnvironmentFrom[EtcdImageVariable]
	for _, kv := range es.Environment {
		if v, ok := strings.CutPrefix(kv, EtcdImageVariable+"="); ok {
			e.ImageInEffect = v
		}
	}
	if runImage != "${"+EtcdImageVariable+"}" && runImage != "$"+EtcdImageVariable {
		e.Image, e.ImageFrom = runImage, u.Files[0]
		e.ImageDropInRefused = fmt.Sprintf("etcd-member.service runs the image %s, not ${%s}: a drop-in setting %s would not change it", runImage, EtcdImageVariable, EtcdImageVariable)
		return
	}
	e.ImageDropIn, e.ImageDropInRefused = imageTarget(u, EtcdImageVariable, EtcdImageDropIn)
	if e.ImageDropIn != "" {
		e.ImageDropInName = path.Base(e.ImageDropIn)
	}
}
