package testhosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Options describe a lab.
type Options struct {
	Count  int
	Names  []string // host names (len == Count); default Prefix-1..N
	Prefix string   // default "host"
	BaseIP string   // "127.0.10." gives 127.0.10.1, .2, ...; sshd on port 22
	Dir    string   // keys, configs and per-host files
	// TrustedUserCAKey is an SSH CA public key line that sshd trusts for
	// user certificates (optional).
	TrustedUserCAKey string
	// HostCA, when set, signs each host's key into a host certificate
	// valid for the host's address for a day, which sshd presents
	// (HostCertificate) besides the plain key (optional).
	HostCA ssh.Signer
	// RootLogin lets root log in too, with the same key. By default sshd
	// refuses root, as on a real fleet: Kedge logs in as User and becomes
	// root through sudo.
	RootLogin bool
	// SudoPassword names hosts where User's sudo asks for a password (no
	// NOPASSWD rule), as on a host Kedge must refuse.
	SudoPassword []string
	// Addresses, when set (len == Count), are the hosts' addresses,
	// instead of BaseIP's.
	Addresses []string
	// RealContainerd: the hosts run a real containerd (integration/realnode),
	// so they get no ctr stand-in, which would shadow the machine's ctr,
	// and no CRI image store or /var/lib/containerd, which are the real
	// containerd's.
	RealContainerd bool
	// OS is the operating system every host pretends to run (Debian,
	// FedoraCoreOS, Flatcar): its /etc/os-release and its update tool
	// (see OSFamily). Empty: the machine's own os-release shows through
	// and no update tool is installed.
	OS OSFamily
	// HostOS sets OS for single hosts, by name.
	HostOS map[string]OSFamily
	// Zincati: the Fedora CoreOS hosts run zincati.service, which
	// registers as rpm-ostree's update driver when it starts, as on a
	// real Fedora CoreOS host where it is not masked; rpm-ostree then
	// refuses to upgrade without --bypass-driver while it runs. The
	// stand-in never updates or reboots by itself.
	Zincati bool
}

// User is the unprivileged login user on every host (as Typhoon's
// Flatcar and Fedora CoreOS hosts have it), with passwordless sudo.
const User = "core"

// The user's IDs, inside each host only (its /etc is its own).
const userID = 1500

// Lab is a set of running hosts.
type Lab struct {
	Hosts          []*Host
	IdentityFile   string // the client's private key
	KnownHostsFile string // every host's key
	PublicKey      string // the client's public key (authorized_keys line)
	User           string // the login user, with passwordless sudo
	dir            string
}

// Host is one sshd.
type Host struct {
	Name          string
	Address       string
	Port          int
	HostKeyPublic string // authorized_keys-format line of the host key
	dir           string
	realCtr       bool     // Options.RealContainerd: the host's ctr is the real one
	os            OSFamily // Options.OS
	zincati       bool     // Options.Zincati, on a Fedora CoreOS host

	mu      sync.Mutex
	cmd     *exec.Cmd // this boot's unshare, when the harness started the host
	initPID int       // PID (in the machine's namespace) of the host's sshd; 0 while down
	boots   int       // boots completed (1 after Start)
	bootErr error     // what starting the units of the last boot said
	ended   error     // why the host stays down (a crash), once it does
	closing bool      // Close was called
	changed chan struct{}
	stop    chan struct{} // closed by Close
	watched chan struct{} // closed when the host's watcher has ended
}

// RequireTools reports what the lab needs and is missing.
func RequireTools() error {
	var missing []string
	for _, tool := range []string{"unshare", "nsenter", "mount", "sudo"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(sshdPath); err != nil {
		missing = append(missing, sshdPath+" (openssh-server)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the SSH test hosts need %s: run `make deps`", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("the SSH test hosts need root (mount namespaces)")
	}
	return nil
}

const sshdPath = "/usr/sbin/sshd"

// Start generates keys and starts every host, returning when all accept
// connections.
func Start(ctx context.Context, o Options) (*Lab, error) {
	l, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(l.Hosts))
	var wg sync.WaitGroup
	for i, h := range l.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// Prepare generates the keys and writes every host's files (Start's first
// half), without starting any host.
func Prepare(o Options) (*Lab, error) {
	if err := RequireTools(); err != nil {
		return nil, err
	}
	if o.Count <= 0 {
		return nil, errors.New("testhosts: Count must be positive")
	}
	if o.Prefix == "" {
		o.Prefix = "host"
	}
	if o.BaseIP == "" {
		o.BaseIP = "127.0.10."
	}
	if o.Names == nil {
		for i := 1; i <= o.Count; i++ {
			o.Names = append(o.Names, fmt.Sprintf("%s-%d", o.Prefix, i))
		}
	}
	if len(o.Names) != o.Count {
		return nil, fmt.Errorf("testhosts: %d names for %d hosts", len(o.Names), o.Count)
	}
	if o.Addresses != nil && len(o.Addresses) != o.Count {
		return nil, fmt.Errorf("testhosts: %d addresses for %d hosts", len(o.Addresses), o.Count)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bins, err := standins()
	if err != nil {
		return nil, err
	}
	l := &Lab{dir: dir, User: User, IdentityFile: filepath.Join(dir, "id_ed25519"), KnownHostsFile: filepath.Join(dir, "known_hosts")}
	clientPub, err := writeKey(l.IdentityFile)
	if err != nil {
		return nil, err
	}
	l.PublicKey = clientPub
	var known strings.Builder
	for i, name := range o.Names {
		h := &Host{Name: name, Address: fmt.Sprintf("%s%d", o.BaseIP, i+1), Port: 22, dir: filepath.Join(dir, name), realCtr: o.RealContainerd, os: o.OS}
		if f, ok := o.HostOS[name]; ok {
			h.os = f
		}
		if err := h.os.valid(); err != nil {
			return nil, fmt.Errorf("testhosts: host %s: %w", name, err)
		}
		if o.Addresses != nil {
			h.Address = o.Addresses[i]
		}
		if err := h.prepare(clientPub, o, bins); err != nil {
			return nil, err
		}
		fmt.Fprintf(&known, "%s %s\n", h.Address, h.HostKeyPublic)
		l.Hosts = append(l.Hosts, h)
	}
	if err := os.WriteFile(l.KnownHostsFile, []byte(known.String()), 0o644); err != nil {
		return nil, err
	}
	return l, nil
}

// writeKey writes a new ed25519 private key (OpenSSH format, 0600) and
// returns its public authorized_keys line.
func writeKey(path string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))), nil
}

func (h *Host) prepare(clientPub string, o Options, bins map[string]string) error {
	caKey, hostCA := o.TrustedUserCAKey, o.HostCA
	for _, d := range []string{"etc-upper/ssh", "etc-upper/sudoers.d", "etc-work", "varlib-upper", "varlib-work", "varlog-upper", "varlog-work", "opt-upper", "opt-work", "root/.ssh", "home/" + User + "/.ssh", "bin", worldDir, bootDir} {
		if err := os.MkdirAll(filepath.Join(h.dir, d), 0o755); err != nil {
			return err
		}
	}
	pub, err := writeKey(filepath.Join(h.dir, "etc-upper/ssh/ssh_host_ed25519_key"))
	if err != nil {
		return err
	}
	h.HostKeyPublic = pub
	if err := os.WriteFile(filepath.Join(h.dir, "root/.ssh/authorized_keys"), []byte(clientPub+"\n"), 0o600); err != nil {
		return err
	}
	if err := addUser(h.dir, clientPub, !slices.Contains(o.SudoPassword, h.Name)); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	rootLogin := "no"
	if o.RootLogin {
		rootLogin = "prohibit-password"
	}
	cfg := fmt.Sprintf(`ListenAddress %s:%d
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
UsePAM no
StrictModes no
PermitRootLogin `+rootLogin+`
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
MaxStartups 200:30:400
MaxSessions 200
Subsystem sftp internal-sftp
PrintMotd no
UseDNS no
LogLevel ERROR
`, h.Address, h.Port)
	if caKey != "" {
		if err := os.WriteFile(filepath.Join(h.dir, "etc-upper/ssh/kedge_user_ca.pub"), []byte(caKey+"\n"), 0o644); err != nil {
			return err
		}
		cfg += "TrustedUserCAKeys /etc/ssh/kedge_user_ca.pub\n"
	}
	if hostCA != nil {
		cert, err := hostCertificate(hostCA, pub, h.Address)
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		if err := os.WriteFile(filepath.Join(h.dir, "etc-upper/ssh/ssh_host_ed25519_key-cert.pub"), cert, 0o644); err != nil {
			return err
		}
		cfg += "HostCertificate /etc/ssh/ssh_host_ed25519_key-cert.pub\n"
	}
	if err := os.WriteFile(filepath.Join(h.dir, "etc-upper/ssh/kedge_sshd_config"), []byte(cfg), 0o644); err != nil {
		return err
	}
	// The machine's own sshd_config.d snippets must not leak in.
	for name, src := range bins {
		if name == "ctr" && o.RealContainerd || isOSTool(name) {
			continue
		}
		if _, err := h.InstallProgram(name, src); err != nil {
			return err
		}
	}
	if err := h.prepareOS(bins, o.Zincati); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	if err := seedImages(h.dir); err != nil {
		return err
	}
	if o.RealContainerd {
		return nil
	}
	return seedCRIImages(h.dir)
}

// hostCertificate signs the host key (an authorized_keys line) into a host
// certificate for address, valid from a minute ago for a day.
func hostCertificate(ca ssh.Signer, hostKey, address string) ([]byte, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	cert := &ssh.Certificate{
		Key: key, CertType: ssh.HostCert, KeyId: "kedge-lab " + address, ValidPrincipals: []string{address},
		ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(24 * time.Hour).Unix()),
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		return nil, fmt.Errorf("sign the host certificate: %w", err)
	}
	return ssh.MarshalAuthorizedKey(cert), nil
}

// setup runs inside the host's fresh namespaces, then becomes sshd.
const setup = `set -e
H="$1"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$H/etc-upper,workdir=$H/etc-work" /etc
mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$H/varlib-upper,workdir=$H/varlib-work" /var/lib
mount -t overlay overlay -o "lowerdir=/var/log,upperdir=$H/varlog-upper,workdir=$H/varlog-work" /var/log
# /opt too: Typhoon's units and scripts write there (/opt/cni/bin,
# /opt/bootstrap), which must not reach the machine.
mount -t overlay overlay -o "lowerdir=/opt,upperdir=$H/opt-upper,workdir=$H/opt-work" /opt
mount --bind "$H/root" /root
mount --bind "$H/home" /home
mount --bind "$H/bin" /usr/local/sbin
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd
# What systemd-tmpfiles makes in every boot's /run (units bind it).
mkdir -p -m 0755 /run/lock
# This boot's: its boot ID, and the kernel release a Debian-family host
# booted, over what the machine's kernel says (uname -r stays the
# machine's); the world's directory (the offer, the reboot request).
mount --bind "$H/boot/boot_id" /proc/sys/kernel/random/boot_id
mount -o remount,bind,ro /proc/sys/kernel/random/boot_id
if [ -f "$H/boot/osrelease" ]; then
	mount --bind "$H/boot/osrelease" /proc/sys/kernel/osrelease
	mount -o remount,bind,ro /proc/sys/kernel/osrelease
fi
mkdir -p /run/kedge-lab
mount --bind "$H/world" /run/kedge-lab
# An OS family's update tools at their real paths, and the machine's
# package tools hidden (whiteouts), read-only over the machine's /usr/bin.
if [ -d "$H/usr-bin" ]; then
	mount -t overlay overlay -o "lowerdir=$H/usr-bin:/usr/bin" /usr/bin
fi
# Last: $H may be under the machine's /tmp.
mount -t tmpfs -o mode=1777 tmpfs /tmp
# /var/lib shared, as systemd leaves a host's mounts (docker refuses the
# kubelet's rshared /var/lib/kubelet otherwise): a peer group of this
# namespace and its children only, the machine's having been cut off by
# unshare --propagation private.
mount --make-shared /var/lib
exec ` + sshdPath + ` -D -e -f /etc/ssh/kedge_sshd_config
`

// root is the host's file system as the machine sees it.
func (h *Host) root() string { return fmt.Sprintf("/proc/%d/root", h.pid()) }

// ReadFile reads a file as the host sees it.
func (h *Host) ReadFile(path string) ([]byte, error) {
	return os.ReadFile(h.root() + path)
}

// WriteFile writes a file on the host, creating its directory.
func (h *Host) WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(h.root()+path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(h.root()+path, data, perm)
}

// Exec runs a program inside the host's namespaces.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	pid := h.pid()
	if pid == 0 {
		return nil, fmt.Errorf("%s on %s: %w", name, h.Name, ErrHostDown)
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-m", "-p", "--", name}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%s on %s: %w: %s", name, h.Name, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return out, fmt.Errorf("%s on %s: %w", name, h.Name, err)
	}
	return out, nil
}

// StandInDir is where a host's stand-in programs are, inside the host.
const StandInDir = "/usr/local/sbin"

// InstallProgram makes the program at src (a path on the machine) runnable
// on the host as StandInDir/name: hard-linked when it can be, so large
// binaries (the control plane's) cost nothing. The host's /root and /tmp
// are its own, so a path there is not visible to it.
func (h *Host) InstallProgram(name, src string) (string, error) {
	dst := filepath.Join(h.dir, "bin", name)
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err != nil {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			return "", err
		}
	}
	return filepath.Join(StandInDir, name), nil
}

// addUser gives the host (its own /etc, an overlay over the machine's) the
// unprivileged login user: passwd, group and shadow entries (no password:
// key logins only), a home with the client's key, and a sudoers rule,
// passwordless unless nopasswd is false.
func addUser(dir, clientPub string, nopasswd bool) error {
	add := func(name, line string, mode os.FileMode) error {
		base, err := os.ReadFile(filepath.Join("/etc", name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, l := range strings.Split(string(base), "\n") {
			if strings.HasPrefix(l, User+":") {
				return fmt.Errorf("the machine's /etc/%s already has a %s entry", name, User)
			}
		}
		if len(base) > 0 && base[len(base)-1] != '\n' {
			base = append(base, '\n')
		}
		return os.WriteFile(filepath.Join(dir, "etc-upper", name), append(base, line+"\n"...), mode)
	}
	id := strconv.Itoa(userID)
	if err := add("passwd", User+":x:"+id+":"+id+":Kedge lab user:/home/"+User+":/bin/sh", 0o644); err != nil {
		return err
	}
	if err := add("group", User+":x:"+id+":", 0o644); err != nil {
		return err
	}
	// "*": no password can match, yet the account is not locked ("!"),
	// so sshd still takes keys.
	if err := add("shadow", User+":*:20000:0:99999:7:::", 0o640); err != nil {
		return err
	}
	rule := User + " ALL=(ALL:ALL) NOPASSWD: ALL\n"
	if !nopasswd {
		rule = User + " ALL=(ALL:ALL) ALL\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "etc-upper/sudoers.d", User), []byte(rule), 0o440); err != nil {
		return err
	}
	home := filepath.Join(dir, "home", User)
	if err := os.WriteFile(filepath.Join(home, ".ssh/authorized_keys"), []byte(clientPub+"\n"), 0o600); err != nil {
		return err
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh/authorized_keys")} {
		if err := os.Chown(p, userID, userID); err != nil {
			return err
		}
	}
	return nil
}
