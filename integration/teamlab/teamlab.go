package teamlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/pglab"
	"kedge.dev/kedge/integration/toolsdir"
	"kedge.dev/kedge/internal/composefile"

	"kedge.dev/kedge/internal/freeport"
)

// Options say where the team lives and what it runs.
type Options struct {
	Repo  string // the repository: docker-compose.yml and deploy/
	Dir   string // the team's directory: KEDGE_DIR is Dir/kedge; logs, PostgreSQL and volumes beside it
	Kedge string // the kedge binary
	// Net is the first three octets of the services' loopback addresses
	// (e.g. "127.0.31"); each service replica gets one of its own.
	Net string
	// Scale is the number of replicas per service (default 1).
	Scale map[string]int
	// Skip are services not to run.
	Skip []string
	// Vars are compose variables, over the ones the harness sets
	// (KEDGE_DIR, POSTGRES_PASSWORD, KEDGE_UI_URL, KEDGE_CODEC_URL).
	Vars map[string]string
	// Setup, when set, fills KEDGE_DIR once the codec key and the TLS
	// certificates are made (`kedge codec keygen`, `kedge setup tls`, as
	// the README's steps) and before any service starts: clusters/,
	// webhook/.
	Setup func(kedgeDir string) error
	// Progress, when set, is told what starts.
	Progress func(format string, args ...any)
}

var temporalTools = toolsdir.Dir{Env: "KEDGE_TEMPORAL_TOOLS", Script: "temporal-tools.sh", What: "Temporal's server, schema tool and Web UI"}

// kedgeServer is Kedge's build of the server (cmd/kedge-temporal, as
// temporal-server), which the compose file's temporal service builds.
var kedgeServer = toolsdir.Dir{Env: "KEDGE_SERVER_TOOLS", Script: "kedge-temporal.sh", What: "Kedge's Temporal server"}

// Team is the running install.
type Team struct {
	opts      Options
	file      *composefile.File
	vars      map[string]string
	tools     string
	server    string // the directory of Kedge's temporal-server
	serverMod string
	uiMod     string
	addr      map[string]string // service name -> its first replica's address
	uiPort    int

	mu    sync.Mutex
	procs map[string][]*Proc // long-running services, by replica
	pg    *pglab.Server
}

// Proc is one replica of a long-running service.
type Proc struct {
	Service string
	Replica int // from 1
	IP      string
	Log     string
	argv    []string
	env     []string
	dir     string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start runs every service of the compose file but the skipped ones, in
// depends_on order, and returns once the last has started.
func Start(ctx context.Context, o Options) (_ *Team, err error) {
	f, err := composefile.Load(filepath.Join(o.Repo, "docker-compose.yml"))
	if err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	t := &Team{opts: o, file: f, addr: map[string]string{}, procs: map[string][]*Proc{}}
	defer func() {
		if err != nil {
			_ = t.Close()
		}
	}()
	if t.tools, err = temporalTools.Get(); err != nil {
		return nil, err
	}
	if t.server, err = kedgeServer.Get(); err != nil {
		return nil, err
	}
	if t.serverMod, err = moduleDir(o.Repo, "go.temporal.io/server"); err != nil {
		return nil, err
	}
	if t.uiMod, err = moduleDir(o.Repo, "github.com/temporalio/ui-server/v2"); err != nil {
		return nil, err
	}
	order, err := f.Order()
	if err != nil {
		return nil, err
	}
	n := 2
	for _, name := range order {
		t.addr[name] = fmt.Sprintf("%s.%d", o.Net, n)
		n += t.scale(name)
	}
	if t.uiPort, err = freePort(); err != nil {
		return nil, err
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	t.vars = map[string]string{
		"KEDGE_DIR":         filepath.Join(o.Dir, "kedge"),
		"POSTGRES_PASSWORD": hex.EncodeToString(pw),
		// The UI server listens on every address: its own port.
		"KEDGE_UI_URL":    fmt.Sprintf("http://127.0.0.1:%d", t.uiPort),
		"KEDGE_CODEC_URL": "http://" + net.JoinHostPort(t.addr["kedge-codec"], "8234"),
	}
	for k, v := range o.Vars {
		t.vars[k] = v
	}
	if err := t.prepare(ctx); err != nil {
		return nil, err
	}
	for _, name := range order {
		if t.skipped(name) {
			continue
		}
		s := f.Services[name]
		for dep, d := range s.DependsOn {
			if t.skipped(dep) {
				return nil, fmt.Errorf("%s depends on %s, which is skipped", name, dep)
			}
			if d.Condition == composefile.Healthy {
				if err := t.waitHealthy(ctx, dep); err != nil {
					return nil, err
				}
			}
		}
		start := time.Now()
		if err := t.startService(ctx, name); err != nil {
			return nil, err
		}
		o.Progress("%s: started in %s", name, time.Since(start).Round(time.Millisecond))
	}
	if err := t.waitServing(ctx, time.Minute); err != nil {
		return nil, err
	}
	return t, nil
}

// waitServing waits until every long-running replica accepts connections
// on the ports its service publishes or exposes.
func (t *Team) waitServing(ctx context.Context, within time.Duration) error {
	for name, procs := range t.procs {
		s := t.file.Services[name]
		var ports []string
		for _, p := range append(append([]string(nil), s.Ports...), s.Expose...) {
			ports = append(ports, p[strings.LastIndex(p, ":")+1:])
		}
		for _, p := range procs {
			for _, port := range ports {
				addr := net.JoinHostPort(p.IP, port)
				if img, _ := composefile.ImageName(s.Image); img == "temporalio/ui" {
					addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(t.uiPort))
				}
				if err := dialUntil(ctx, addr, within); err != nil {
					return fmt.Errorf("%s-%d: %w; log:\n%s", name, p.Replica, err, tail(t.Logs(name), 40))
				}
			}
		}
	}
	return nil
}

// prepare makes KEDGE_DIR as the README's steps do, then hands it to Setup.
func (t *Team) prepare(ctx context.Context) error {
	dir := t.vars["KEDGE_DIR"]
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"codec", "keygen", "--out", filepath.Join(dir, "codec.key")},
		{"codec", "token", "--out", filepath.Join(dir, "codec-token")},
		{"setup", "tls", "--out", filepath.Join(dir, "tls")},
	} {
		if _, err := os.Stat(args[len(args)-1]); err == nil {
			continue
		}
		out, err := exec.CommandContext(ctx, t.opts.Kedge, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kedge %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	if t.opts.Setup != nil {
		return t.opts.Setup(dir)
	}
	return nil
}

func (t *Team) scale(name string) int {
	if n := t.opts.Scale[name]; n > 0 {
		return n
	}
	return 1
}

func (t *Team) skipped(name string) bool {
	for _, s := range t.opts.Skip {
		if s == name {
			return true
		}
	}
	return false
}

// KedgeDir is the operator's directory the services mount (KEDGE_DIR).
func (t *Team) KedgeDir() string { return t.vars["KEDGE_DIR"] }

// Address is Temporal's frontend.
func (t *Team) Address() string { return net.JoinHostPort(t.addr["temporal"], "7233") }

// IP is a service's (first replica's) address.
func (t *Team) IP(service string) string { return t.addr[service] }

// UIURL is the Web UI.
func (t *Team) UIURL() string { return t.vars["KEDGE_UI_URL"] }

// Var is a compose variable as the harness set it.
func (t *Team) Var(name string) string { return t.vars[name] }

// Postgres is the database server.
func (t *Team) Postgres() *pglab.Server { return t.pg }

// Procs are a long-running service's replicas.
func (t *Team) Procs(service string) []*Proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Proc(nil), t.procs[service]...)
}

// startService starts every replica of a service; a job (restart:
// on-failure) runs to success first.
func (t *Team) startService(ctx context.Context, name string) error {
	s := t.file.Services[name]
	img, _ := composefile.ImageName(s.Image)
	if img == "postgres" {
		return t.startPostgres(ctx, s)
	}
	for r := 1; r <= t.scale(name); r++ {
		p, err := t.proc(name, r)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if tries, job := jobTries(s.Restart); job {
			if err := t.runJob(ctx, p, tries); err != nil {
				return err
			}
			continue
		}
		if err := p.start(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t.mu.Lock()
		t.procs[name] = append(t.procs[name], p)
		t.mu.Unlock()
	}
	return nil
}

// jobTries reads restart: on-failure[:N] (a one-shot job) as N retries.
func jobTries(restart string) (int, bool) {
	rest, ok := strings.CutPrefix(restart, "on-failure")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, ":"))
	if err != nil {
		n = 3
	}
	return n + 1, true
}

func (t *Team) runJob(ctx context.Context, p *Proc, tries int) error {
	for i := 1; ; i++ {
		if err := p.start(); err != nil {
			return err
		}
		<-p.done
		code := p.cmd.ProcessState.ExitCode()
		if code == 0 {
			return nil
		}
		if i >= tries {
			log, _ := os.ReadFile(p.Log)
			return fmt.Errorf("%s: exit %d after %d tries:\n%s", p.Service, code, i, tail(string(log), 40))
		}
		t.opts.Progress("%s: exit %d, retrying", p.Service, code)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func (t *Team) startPostgres(ctx context.Context, s *composefile.Service) error {
	env := map[string]string{}
	for k, v := range s.Environment {
		x, err := composefile.Interpolate(v, t.vars)
		if err != nil {
			return err
		}
		env[k] = x
	}
	// pglab's own temporary directory: PostgreSQL runs as an
	// unprivileged user, who must reach it.
	pg, err := pglab.Start(ctx, pglab.Options{Host: t.addr["postgresql"],
		Port: 5432, User: env["POSTGRES_USER"], Password: env["POSTGRES_PASSWORD"]})
	if err != nil {
		return err
	}
	t.pg = pg
	return nil
}

// proc builds the command of one replica: the image's program with the
// service's entrypoint, command and environment, mapped onto this machine.
func (t *Team) proc(name string, replica int) (*Proc, error) {
	s := t.file.Services[name]
	ms, err := composefile.Mounts(s)
	if err != nil {
		return nil, err
	}
	ip := t.addr[name]
	if replica > 1 {
		i := strings.LastIndex(ip, ".")
		last, _ := strconv.Atoi(ip[i+1:])
		ip = fmt.Sprintf("%s.%d", ip[:i], last+replica-1)
	}
	p := &Proc{Service: name, Replica: replica, IP: ip,
		Log: filepath.Join(t.opts.Dir, "logs", fmt.Sprintf("%s-%d.log", name, replica)),
		dir: filepath.Join(t.opts.Dir, "home", fmt.Sprintf("%s-%d", name, replica))}
	for _, d := range []string{filepath.Dir(p.Log), p.dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	env := map[string]string{}
	for k, v := range s.Environment {
		if env[k], err = t.value(ms, ip, k, v); err != nil {
			return nil, fmt.Errorf("environment %s: %w", k, err)
		}
	}
	var args []string
	for _, a := range append(append([]string(nil), s.Entrypoint...), s.Command...) {
		x, err := t.value(ms, ip, "", a)
		if err != nil {
			return nil, err
		}
		args = append(args, x)
	}
	img, _ := composefile.ImageName(s.Image)
	binPath := t.tools + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	if s.Build != nil && *s.Build != t.file.KedgeBuild {
		// An image built on an official one, with a program of this
		// repository in place of the image's: Kedge's Temporal server
		// (deploy/temporal/Dockerfile) is the one the harness knows.
		if img, err = t.buildBase(*s.Build); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if img != "temporalio/server" {
			return nil, fmt.Errorf("%s: built on %s: the harness knows only a build on temporalio/server (Kedge's server)", name, img)
		}
		binPath = t.server + ":" + binPath
	}
	switch {
	case s.Build != nil && *s.Build == t.file.KedgeBuild:
		p.argv = append([]string{t.opts.Kedge}, args...)
	case img == "temporalio/admin-tools":
		// The compose job runs this repository's script, which calls
		// temporal-sql-tool on the schemas the image holds.
		env["TEMPORAL_SCHEMA_DIR"] = filepath.Join(t.serverMod, "schema")
		p.argv = args
	case img == "temporalio/server":
		// The image's entrypoint: it runs `temporal-server start` (Kedge's
		// build first on the PATH when the service builds it), which
		// renders the server's embedded config template from the
		// environment. Alpine's sh has pipefail; Debian's dash does not.
		p.argv = append([]string{"bash", filepath.Join(t.serverMod, "docker/scripts/sh/entrypoint.sh")}, args...)
	case img == "temporalio/ui":
		env["TEMPORAL_UI_PORT"] = strconv.Itoa(t.uiPort)
		p.argv = append([]string{filepath.Join(t.tools, "temporal-ui-server"), "--root", t.uiMod, "--env", "docker", "start"}, args...)
	default:
		return nil, fmt.Errorf("image %s: the harness does not know its program", s.Image)
	}
	if len(p.argv) == 0 {
		return nil, errors.New("no command")
	}
	env["PATH"] = binPath
	env["HOME"] = p.dir
	for k, v := range env {
		p.env = append(p.env, k+"="+v)
	}
	return p, nil
}

// buildBase is the image a service's Dockerfile's last stage starts from.
func (t *Team) buildBase(b composefile.Build) (string, error) {
	file := filepath.Join(t.opts.Repo, b.Context, b.Dockerfile)
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(string(data), -1)
	if len(froms) == 0 {
		return "", fmt.Errorf("%s: no FROM", file)
	}
	img, _ := composefile.ImageName(froms[len(froms)-1][1])
	return img, nil
}

// value maps one environment value or argument from the container onto
// this machine: compose variables interpolated; a service's name in
// HOST:PORT (or in a *_SEEDS list) to its address; 0.0.0.0 to the
// replica's own; a path under a volume to what the volume mounts.
func (t *Team) value(ms []composefile.Mount, ip, key, v string) (string, error) {
	v, err := composefile.Interpolate(v, t.vars)
	if err != nil {
		return "", err
	}
	if v == "0.0.0.0" {
		return ip, nil
	}
	if h, port, err := net.SplitHostPort(v); err == nil && !strings.ContainsAny(v, "/") {
		if h == "0.0.0.0" {
			return net.JoinHostPort(ip, port), nil
		}
		if a, ok := t.addr[h]; ok {
			return net.JoinHostPort(a, port), nil
		}
	}
	if strings.HasSuffix(key, "_SEEDS") {
		if a, ok := t.addr[v]; ok {
			return a, nil
		}
	}
	if path.IsAbs(v) {
		if m, rel, ok := composefile.Under(ms, v); ok {
			return t.source(m, rel)
		}
	}
	return v, nil
}

func (t *Team) source(m composefile.Mount, rel string) (string, error) {
	switch {
	case m.Repo:
		return filepath.Join(t.opts.Repo, m.Source, rel), nil
	case m.Named:
		dir := filepath.Join(t.opts.Dir, "volumes", m.Source)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		return filepath.Join(dir, rel), nil
	}
	src, err := composefile.Interpolate(m.Source, t.vars)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(t.opts.Repo, src)
	}
	return filepath.Join(src, rel), nil
}

func (p *Proc) start() error {
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "--- %s start: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.Stdout, cmd.Stderr = log, log
	// Gone with the test process, even when it dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(p.done)
	return nil
}

// Running says whether the replica's process is up.
func (p *Proc) Running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Pid is the replica's process.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill stops the replica with SIGKILL, as a crash or an OOM kill would.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL, 0) }

// Stop stops the replica with SIGTERM, then SIGKILL after 30 seconds.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM, 30*time.Second) }

// Restart starts a stopped replica again, with the same command and
// environment.
func (p *Proc) Restart() error {
	if p.Running() {
		return fmt.Errorf("%s-%d is running", p.Service, p.Replica)
	}
	return p.start()
}

func (p *Proc) signal(sig syscall.Signal, grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	if grace > 0 {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-p.done
}

// waitHealthy runs a service's healthcheck until it passes. The checks
// the file uses: `nc -z localhost PORT` (a TCP connect to the service's
// address) and pg_isready (PostgreSQL answers, which Start waited for).
func (t *Team) waitHealthy(ctx context.Context, name string) error {
	s := t.file.Services[name]
	if s.Healthcheck == nil {
		return fmt.Errorf("%s: depends_on wants it healthy, but it has no healthcheck", name)
	}
	test := s.Healthcheck.Test
	switch {
	case len(test) == 2 && test[0] == "CMD-SHELL" && strings.HasPrefix(test[1], "pg_isready"):
		if t.pg == nil {
			return fmt.Errorf("%s is not running", name)
		}
		return dialUntil(ctx, t.pg.Address(), time.Minute)
	case len(test) == 5 && test[0] == "CMD" && test[1] == "nc" && test[2] == "-z" && test[3] == "localhost":
		interval, err := time.ParseDuration(s.Healthcheck.Interval)
		if err != nil {
			return fmt.Errorf("%s: healthcheck interval: %w", name, err)
		}
		addr := net.JoinHostPort(t.addr[name], test[4])
		if err := dialUntil(ctx, addr, interval*time.Duration(max(1, s.Healthcheck.Retries))); err != nil {
			return fmt.Errorf("%s: %w; log:\n%s", name, err, tail(t.Logs(name), 40))
		}
		return nil
	}
	return fmt.Errorf("%s: healthcheck %q is not one the harness knows", name, test)
}

func dialUntil(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s", addr, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitListening waits until a service replica accepts connections on port.
func (p *Proc) WaitListening(ctx context.Context, port string, within time.Duration) error {
	return dialUntil(ctx, net.JoinHostPort(p.IP, port), within)
}

// Logs are the logs of a service's replicas.
func (t *Team) Logs(service string) string {
	files, _ := filepath.Glob(filepath.Join(t.opts.Dir, "logs", service+"-*.log"))
	var b strings.Builder
	for _, f := range files {
		replica := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), service+"-"), ".log")
		if _, err := strconv.Atoi(replica); err != nil {
			continue // another service whose name starts the same
		}
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "== %s\n%s", filepath.Base(f), data)
	}
	return b.String()
}

// Close stops every service, the last started first, and PostgreSQL.
func (t *Team) Close() error {
	order, _ := t.file.Order()
	for i := len(order) - 1; i >= 0; i-- {
		for _, p := range t.Procs(order[i]) {
			p.Stop()
		}
	}
	if t.pg != nil {
		return t.pg.Close()
	}
	return nil
}

func moduleDir(repo, mod string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = repo
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("go list -m %s: %v", mod, err)
	}
	return dir, nil
}

func freePort() (int, error) {
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
