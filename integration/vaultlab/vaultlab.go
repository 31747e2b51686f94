package vaultlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/vault/api"

	"kedge.dev/kedge/integration/toolsdir"

	"kedge.dev/kedge/internal/freeport"
)

// Mount paths and role names the lab configures.
const (
	PKIPath      = "pki"
	PKIRole      = "kubernetes"
	SSHPath      = "ssh-client-signer"
	SSHRole      = "kedge"
	KVPath       = "secret"
	CACommonName = "kedge-lab-ca"
)

// Options configure a Vault server.
type Options struct {
	Dir string // logs
}

// Vault is a running, configured dev-mode Vault server.
type Vault struct {
	Address        string      // http://127.0.0.1:port
	Token          string      // the root token
	Client         *api.Client // authenticated with Token
	CACertPEM      []byte      // the PKI engine's root CA certificate, PEM
	SSHCAPublicKey string      // the SSH engine's CA public key, one authorized_keys line

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  string
	stop sync.Once
}

var tools = toolsdir.Dir{Env: "KEDGE_VAULT_TOOLS", Script: "vault-tools.sh", What: "vault"}

// Tools returns the directory holding the vault binary: $KEDGE_VAULT_TOOLS,
// or else built by scripts/vault-tools.sh (cached per version).
func Tools() (string, error) { return tools.Get() }

func freePort() (int, error) {
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "kedge-" + hex.EncodeToString(b), nil
}

// Start starts Vault in dev mode on a free loopback port, waits until it is
// healthy and configures the PKI, SSH and KV engines.
func Start(ctx context.Context, o Options) (*Vault, error) {
	tools, err := Tools()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(tools, "vault")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("vault binary: %w", err)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	// The port is free when chosen but may be taken before Vault binds it;
	// a server that exits before becoming healthy is retried on another.
	var v *Vault
	for attempt := 1; ; attempt++ {
		if v, err = start(ctx, bin, dir, token, attempt); err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil || !errors.Is(err, errExited) {
			return nil, err
		}
	}
	if err := v.configure(ctx); err != nil {
		return nil, v.fail(err)
	}
	return v, nil
}

var errExited = errors.New("vault exited")

func start(ctx context.Context, bin, dir, token string, attempt int) (*Vault, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	name := "vault.log"
	if attempt > 1 {
		name = fmt.Sprintf("vault.%d.log", attempt)
	}
	logPath := filepath.Join(dir, name)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-dev", "-dev-no-store-token",
		"-dev-root-token-id="+token, "-dev-listen-address="+listen)
	cmd.Dir = dir
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start vault: %w", err)
	}
	v := &Vault{Address: "http://" + listen, Token: token, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); logf.Close(); close(v.done) }()

	cfg := api.DefaultConfig()
	if cfg.Error != nil {
		return nil, v.fail(cfg.Error)
	}
	cfg.Address = v.Address
	cfg.Timeout = 10 * time.Second
	if v.Client, err = api.NewClient(cfg); err != nil {
		return nil, v.fail(err)
	}
	v.Client.SetToken(token)
	v.Client.ClearNamespace()
	if err := v.waitHealthy(ctx); err != nil {
		return nil, v.fail(err)
	}
	return v, nil
}

// serverEnv is this process's environment without VAULT_* variables, so a
// developer's own Vault settings never reach the lab server.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	return env
}

func (v *Vault) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-v.done:
			return fmt.Errorf("%w before becoming healthy: %s", errExited, v.logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, err := v.Client.Sys().HealthWithContext(hctx)
		cancel()
		if err == nil && h.Initialized && !h.Sealed && !h.Standby {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vault at %s not healthy (last error %v): %s", v.Address, err, v.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (v *Vault) configure(ctx context.Context) error {
	c := v.Client
	sys := c.Sys()
	logical := c.Logical()

	// PKI: a root CA and a role for Kubernetes components and nodes.
	if err := sys.MountWithContext(ctx, PKIPath, &api.MountInput{Type: "pki",
		Description: "Kedge lab PKI", Config: api.MountConfigInput{MaxLeaseTTL: "87600h"}}); err != nil {
		return fmt.Errorf("mount %s: %w", PKIPath, err)
	}
	root, err := logical.WriteWithContext(ctx, PKIPath+"/root/generate/internal", map[string]any{
		"common_name": CACommonName,
		"issuer_name": "root",
		"ttl":         "87600h",
	})
	if err != nil {
		return fmt.Errorf("generate the root CA: %w", err)
	}
	ca, _ := dataString(root, "certificate")
	if ca == "" {
		return errors.New("generate the root CA: no certificate in the response")
	}
	v.CACertPEM = []byte(strings.TrimSpace(ca) + "\n")
	if _, err := logical.WriteWithContext(ctx, PKIPath+"/roles/"+PKIRole, map[string]any{
		"allow_any_name":    true,
		"allow_ip_sans":     true,
		"allow_localhost":   true,
		"enforce_hostnames": false, // Kubernetes names such as system:node:<name> are not hostnames
		"max_ttl":           "8760h",
	}); err != nil {
		return fmt.Errorf("write the %s role: %w", PKIRole, err)
	}

	// SSH: a CA that signs user certificates.
	if err := sys.MountWithContext(ctx, SSHPath, &api.MountInput{Type: "ssh",
		Description: "Kedge lab SSH CA"}); err != nil {
		return fmt.Errorf("mount %s: %w", SSHPath, err)
	}
	sshCA, err := logical.WriteWithContext(ctx, SSHPath+"/config/ca", map[string]any{
		"generate_signing_key": true,
		"key_type":             "ssh-ed25519",
	})
	if err != nil {
		return fmt.Errorf("generate the SSH CA: %w", err)
	}
	pub, _ := dataString(sshCA, "public_key")
	if pub == "" {
		return errors.New("generate the SSH CA: no public key in the response")
	}
	v.SSHCAPublicKey = strings.TrimSpace(pub)
	if _, err := logical.WriteWithContext(ctx, SSHPath+"/roles/"+SSHRole, map[string]any{
		"key_type":                "ca",
		"allow_user_certificates": true,
		"allowed_users":           "*",
		"default_user":            "core",
		"ttl":                     "30m",
		"default_extensions":      map[string]string{"permit-pty": ""},
	}); err != nil {
		return fmt.Errorf("write the %s role: %w", SSHRole, err)
	}

	// KV version 2 at secret/ (dev mode mounts it; mount it if absent).
	mounts, err := sys.ListMountsWithContext(ctx)
	if err != nil {
		return fmt.Errorf("list mounts: %w", err)
	}
	if m, ok := mounts[KVPath+"/"]; ok {
		if m.Type != "kv" || m.Options["version"] != "2" {
			return fmt.Errorf("%s/ is mounted as %s %v, not kv version 2", KVPath, m.Type, m.Options)
		}
	} else if err := sys.MountWithContext(ctx, KVPath, &api.MountInput{Type: "kv",
		Options: map[string]string{"version": "2"}}); err != nil {
		return fmt.Errorf("mount %s: %w", KVPath, err)
	}
	// A new KV v2 mount answers only once its (empty) upgrade has finished.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := logical.ReadWithContext(ctx, KVPath+"/config")
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s/ never became ready: %w", KVPath, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dataString(s *api.Secret, key string) (string, bool) {
	if s == nil || s.Data == nil {
		return "", false
	}
	str, ok := s.Data[key].(string)
	return str, ok
}

func (v *Vault) logTail() string {
	b, _ := os.ReadFile(v.log)
	tail := string(b)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return tail
}

func (v *Vault) fail(err error) error {
	v.Stop()
	return err
}

// Stop stops the server: SIGTERM, then SIGKILL after five seconds. Dev mode
// keeps everything in memory, so nothing survives it.
func (v *Vault) Stop() {
	v.stop.Do(func() {
		if v.cmd == nil || v.cmd.Process == nil {
			return
		}
		_ = v.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-v.done:
		case <-time.After(5 * time.Second):
			_ = v.cmd.Process.Kill()
			<-v.done
		}
	})
}
