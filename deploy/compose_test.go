package deploy

import (
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"go.temporal.io/server/common/dynamicconfig"

	"kedge.dev/kedge/internal/composefile"
	"kedge.dev/kedge/internal/mtls"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/workflows"
)

const root = ".." // the repository

type (
	compose = composefile.File
	service = composefile.Service
	mount   = composefile.Mount
)

// The variables each official image reads, taken from the sources in the
// module cache where they exist (a misspelt variable is silently ignored
// by a container, so the test refuses it here): the server's config
// template and entrypoint, the UI server's config; admin-tools runs this
// repository's scripts, which name what they read; postgres as its image
// documents.
func imageEnv(t *testing.T, c *compose, s *service, ms []mount) []string {
	t.Helper()
	img, _ := program(t, c, s)
	switch img {
	case "postgres":
		return []string{"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PGDATA"}
	case "temporalio/server":
		dir := moduleDir(t, "go.temporal.io/server")
		return append(envNames(t, filepath.Join(dir, "common/config/config_template_embedded.yaml"), `env "([A-Z_0-9]+)"`),
			envNames(t, filepath.Join(dir, "docker/scripts/sh/entrypoint.sh"), `\$\{([A-Z_0-9]+)`)...)
	case "temporalio/ui":
		return envNames(t, filepath.Join(moduleDir(t, "github.com/temporalio/ui-server/v2"), "config/docker.yaml"), `env "([A-Z_0-9]+)"`)
	case "temporalio/admin-tools":
		var names []string
		for _, a := range append(slices.Clone(s.Entrypoint), s.Command...) {
			if m, rel, ok := under(ms, a); ok && m.Repo {
				names = append(names, envNames(t, filepath.Join(root, m.Source, rel), `\$\{([A-Z_0-9]+)`)...)
			}
		}
		return names
	}
	t.Errorf("image %s is not one the test knows: teach imageEnv what it reads", s.Image)
	return nil
}

func envNames(t *testing.T, file, pattern string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(string(data), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("no variables found in %s", file)
	}
	return names
}

// moduleDir is where the go command keeps a module of go.mod's graph.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return string(bytes.TrimSpace(out))
}

// moduleVersion is mod's version in go.mod's graph, without the v.
func moduleVersion(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimPrefix(string(bytes.TrimSpace(out)), "v")
}

// The port each official image serves.
var imagePort = map[string]string{"postgres": "5432", "temporalio/server": "7233", "temporalio/ui": "8080"}

func load(t *testing.T) (*compose, string) {
	t.Helper()
	file := filepath.Join(root, "docker-compose.yml")
	c, err := composefile.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return c, string(raw)
}

// expand interpolates like Compose with no variable set: ${VAR:-default}
// gives the default, ${VAR} gives "".
func expand(t *testing.T, s string) string {
	t.Helper()
	out, err := composefile.Interpolate(s, nil)
	if err != nil {
		t.Error(err)
	}
	return out
}

func imageName(image string) (name, tag string) { return composefile.ImageName(image) }

func kedgeServices(c *compose) []string {
	var names []string
	for name, s := range c.Services {
		if isKedge(c, s) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// isKedge says whether a service runs the kedge binary (the image of
// x-kedge-build).
func isKedge(c *compose, s *service) bool { return s.Build != nil && *s.Build == c.KedgeBuild }

// serverDockerfile is the Dockerfile of Kedge's Temporal server: the
// official server image with cmd/kedge-temporal as its temporal-server.
const serverDockerfile = "deploy/temporal/Dockerfile"

// program is the image whose program a service runs and its tag: the
// service's image, or for Kedge's server build the official image it
// starts from (whose entrypoint, config template and healthcheck tools it
// keeps). A kedge service's is its own image.
func program(t *testing.T, c *compose, s *service) (string, string) {
	t.Helper()
	if s.Build == nil || isKedge(c, s) {
		return imageName(s.Image)
	}
	froms := dockerfileFroms(t, path.Join(s.Build.Context, s.Build.Dockerfile))
	if len(froms) == 0 {
		return "", ""
	}
	return imageName(froms[len(froms)-1])
}

// dockerfileFroms are the images a Dockerfile's stages start from.
func dockerfileFroms(t *testing.T, rel string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(readFile(t, rel), -1) {
		out = append(out, m[1])
	}
	return out
}

// Every image is pinned to a version; Temporal's schema tool is the
// server's version; the kedge services all run the image this repository
// builds.
func TestComposeImagesArePinned(t *testing.T) {
	c, _ := load(t)
	pinned := regexp.MustCompile(`^\d+(\.\d+)*$`)
	versions := map[string]string{}
	for name, s := range c.Services {
		img, tag := program(t, c, s)
		if s.Build != nil && !isKedge(c, s) {
			if s.Image != "kedge-temporal:local" || s.Build.Context != c.KedgeBuild.Context || s.Build.Dockerfile != serverDockerfile {
				t.Errorf("%s: builds %+v as %q: only the server is built other than x-kedge-build, as kedge-temporal:local from %s", name, *s.Build, s.Image, serverDockerfile)
			}
		}
		if isKedge(c, s) {
			if s.Image != "kedge:local" {
				t.Errorf("%s: a kedge service is tagged kedge:local, got %q", name, s.Image)
			}
			continue
		}
		if !pinned.MatchString(tag) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
		versions[img] = tag
	}
	if versions["temporalio/admin-tools"] != versions["temporalio/server"] {
		t.Errorf("admin-tools %s sets up the schema of server %s: use the same version", versions["temporalio/admin-tools"], versions["temporalio/server"])
	}
	// The images are the releases whose sources the other checks read:
	// the UI server Kedge embeds, the server's minor version.
	if ui, mod := versions["temporalio/ui"], moduleVersion(t, "github.com/temporalio/ui-server/v2"); ui != mod {
		t.Errorf("temporalio/ui:%s, but go.mod has ui-server %s", ui, mod)
	}
	minor := func(v string) string { p := strings.SplitN(v, ".", 3); return strings.Join(p[:min(2, len(p))], ".") }
	if srv, mod := versions["temporalio/server"], moduleVersion(t, "go.temporal.io/server"); minor(srv) != minor(mod) {
		t.Errorf("temporalio/server:%s, but go.mod has server %s", srv, mod)
	}
	if len(kedgeServices(c)) == 0 {
		t.Error("no service is built from the repository")
	}
}

// The Dockerfile builds the kedge main package as a static binary into
// the path the final stage copies and runs; its base images are pinned.
func TestDockerfileBuildsTheKedgeBinary(t *testing.T) {
	c, _ := load(t)
	df := filepath.Join(root, c.KedgeBuild.Context, c.KedgeBuild.Dockerfile)
	data, err := os.ReadFile(df)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(froms) < 2 {
		t.Fatalf("want a build stage and a small final stage, got FROM %v", froms)
	}
	for _, f := range froms {
		if _, tag := imageName(f[1]); tag == "" || tag == "latest" {
			t.Errorf("base image %s is not pinned", f[1])
		}
	}
	if final := froms[len(froms)-1][1]; !strings.HasPrefix(final, "gcr.io/distroless/static") && !strings.HasPrefix(final, "scratch") {
		t.Errorf("final image %s is not a static-only base", final)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readFile(t, "go.mod"))
	if _, tag := imageName(froms[0][1]); goVersion == nil || !strings.HasPrefix(tag, goVersion[1]) {
		t.Errorf("build image %s does not match go.mod's go %v", froms[0][1], goVersion)
	}
	if !regexp.MustCompile(`CGO_ENABLED=0`).MatchString(text) {
		t.Error("the binary is not built with CGO_ENABLED=0 (static)")
	}
	m := regexp.MustCompile(`go build [^\n]*-o (\S+) (\./\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no `go build ... -o OUT ./PKG` in the Dockerfile")
	}
	out, pkg := m[1], m[2]
	main, err := os.ReadFile(filepath.Join(root, pkg, "main.go"))
	if err != nil || !bytes.Contains(main, []byte("package main")) {
		t.Errorf("%s is not a main package: %v", pkg, err)
	}
	cp := regexp.MustCompile(`(?m)^COPY --from=build (\S+) (\S+)$`).FindStringSubmatch(text)
	if cp == nil || cp[1] != out {
		t.Fatalf("the final stage does not copy the built %s: %v", out, cp)
	}
	ep := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindStringSubmatch(text)
	if ep == nil || ep[1] != cp[2] {
		t.Errorf("ENTRYPOINT %v does not run the copied binary %s", ep, cp[2])
	}
	ignore := readFile(t, ".dockerignore")
	for _, secret := range []string{"kedge/", ".git"} {
		if !strings.Contains(ignore, secret) {
			t.Errorf(".dockerignore does not keep %s out of the build context", secret)
		}
	}
}

// Kedge's Temporal server: the official server image (the version the
// other checks read) with its temporal-server replaced by a static build
// of cmd/kedge-temporal, at the path the image's entrypoint runs it from;
// the compose file's server builds it.
func TestServerDockerfileBuildsKedgeTemporal(t *testing.T) {
	c, _ := load(t)
	srv := c.Services["temporal"]
	if srv == nil || srv.Build == nil || srv.Build.Dockerfile != serverDockerfile {
		t.Fatalf("the temporal service is not built from %s: %+v", serverDockerfile, srv)
	}
	text := readFile(t, serverDockerfile)
	froms := dockerfileFroms(t, serverDockerfile)
	if len(froms) != 2 {
		t.Fatalf("want a build stage and the server image, got FROM %v", froms)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readFile(t, "go.mod"))
	if img, tag := imageName(froms[0]); img != "golang" || goVersion == nil || !strings.HasPrefix(tag, goVersion[1]) {
		t.Errorf("build image %s does not match go.mod's go %v", froms[0], goVersion)
	}
	if img, _ := imageName(froms[1]); img != "temporalio/server" {
		t.Errorf("final image %s is not the official server image", froms[1])
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Error("the server is not built with CGO_ENABLED=0 (static, as the official one)")
	}
	m := regexp.MustCompile(`go build [^\n]*-o (\S+) (\./\S+)`).FindStringSubmatch(text)
	if m == nil || m[2] != "./cmd/kedge-temporal" {
		t.Fatalf("no `go build ... -o OUT ./cmd/kedge-temporal` in %s: %v", serverDockerfile, m)
	}
	if main := readFile(t, "cmd/kedge-temporal/main.go"); !strings.Contains(main, "package main") || !strings.Contains(main, "temporal.WithAuthorizer(") ||
		!strings.Contains(main, "temporal.WithClaimMapper(") {
		t.Error("cmd/kedge-temporal is not a main package that passes an authorizer and a claim mapper")
	}
	// Where the official image keeps temporal-server, which its entrypoint
	// runs by name: from the server module's own Dockerfile and script.
	dir := moduleDir(t, "go.temporal.io/server")
	official, err := os.ReadFile(filepath.Join(dir, "docker/targets/server.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dest := regexp.MustCompile(`(?m)^COPY [^\n]*/temporal-server (\S+)$`).FindSubmatch(official)
	entry, err := os.ReadFile(filepath.Join(dir, "docker/scripts/sh/entrypoint.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if dest == nil || !regexp.MustCompile(`(?m)^exec temporal-server start`).Match(entry) {
		t.Fatalf("the official image no longer copies temporal-server to a directory and runs it by name: %q", dest)
	}
	want := path.Join(string(dest[1]), "temporal-server")
	cp := regexp.MustCompile(`(?m)^COPY --from=build (\S+) (\S+)$`).FindStringSubmatch(text)
	if cp == nil || cp[1] != m[1] || cp[2] != want {
		t.Errorf("the server image does not copy the built %s over %s: %v", m[1], want, cp)
	}
	if regexp.MustCompile(`(?m)^(ENTRYPOINT|CMD|USER)`).MatchString(text) {
		t.Error("the server image changes the official image's entrypoint, command or user")
	}
}

// Each client of Temporal in the compose file dials with a certificate
// `kedge setup tls` makes by default, whose role is the one its program
// needs: the worker a worker of the task queue it polls, the webhook an
// operator (it starts and approves runs), `kedge setup` an admin (the
// namespace, search attributes), the Web UI a viewer (it asks no login).
func TestComposeClientsHaveTheirRoles(t *testing.T) {
	c, _ := load(t)
	want := map[string]mtls.Role{"kedge-worker": mtls.RoleWorker, "kedge-webhook": mtls.RoleOperator,
		"kedge-setup": mtls.RoleAdmin, "temporal-ui": mtls.RoleViewer}
	for name, s := range c.Services {
		cert := cmp.Or(s.Environment["TEMPORAL_TLS_CLIENT_CERT_PATH"], s.Environment["TEMPORAL_TLS_CERT"])
		role, dials := want[name]
		if cert == "" {
			if dials {
				t.Errorf("%s dials Temporal without a client certificate", name)
			}
			continue
		}
		client := strings.TrimSuffix(path.Base(cert), ".pem")
		if !slices.Contains(mtls.DefaultClients, client) {
			t.Errorf("%s dials with %s, which `kedge setup tls` does not make by default", name, cert)
		}
		if got := mtls.DefaultRole(client); got != role {
			t.Errorf("%s dials with %s, a %s's certificate; it needs a %q's", name, cert, got, role)
		}
	}
	// The worker's certificate may poll the queue the worker polls.
	if q := expand(t, c.Services["kedge-worker"].Environment["KEDGE_TASK_QUEUE"]); q != workflows.DefaultTaskQueue {
		t.Errorf("kedge-worker polls %q by default, but its certificate is made for %q (`kedge setup tls --task-queue`)", q, workflows.DefaultTaskQueue)
	}
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// parsed is what the kedge CLI made of a service's command and
// environment.
type parsed struct {
	cmd  *cli.Command
	ctx  *cli.Context
	envs map[string]string // env var -> flag that reads it
}

// runCLI parses a kedge service's command line with its environment
// through the real CLI, with the command's action replaced by a probe.
func runCLI(t *testing.T, env map[string]string, args []string) (*parsed, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := starter.NewApp(starter.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	cmd := app.Command(args[0])
	if cmd == nil {
		return nil, fmt.Errorf("kedge has no command %q", args[0])
	}
	p := &parsed{cmd: cmd, envs: map[string]string{}}
	for _, f := range cmd.Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, e := range ev.GetEnvVars() {
				p.envs[e] = f.Names()[0]
			}
		}
	}
	cmd.Action = func(c *cli.Context) error { p.ctx = c; return nil }
	for k, v := range env {
		t.Setenv(k, v)
	}
	if err := app.Run(append([]string{"kedge"}, args...)); err != nil {
		return nil, fmt.Errorf("kedge %s: %w (%s)", strings.Join(args, " "), err, errOut.String())
	}
	if p.ctx == nil {
		return nil, fmt.Errorf("kedge %s did not reach its action", strings.Join(args, " "))
	}
	return p, nil
}

// goStringLiterals is every string literal in the module's non-test Go
// files: an environment variable the code reads without a flag must be
// named in one.
func goStringLiterals(t *testing.T) map[string]bool {
	t.Helper()
	lits := map[string]bool{}
	lit := regexp.MustCompile(`"([A-Z][A-Z0-9_]+)"`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "integration" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllSubmatch(data, -1) {
			lits[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lits
}

func mounts(t *testing.T, name string, s *service) []mount {
	t.Helper()
	ms, err := composefile.Mounts(s)
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	return ms
}

func under(ms []mount, p string) (mount, string, bool) { return composefile.Under(ms, p) }

// Every kedge service runs a command the CLI has, with flags it has;
// every variable it sets is read by the flag it is meant for (or by the
// code); every file it names is mounted.
func TestComposeKedgeCommandsExistInTheCLI(t *testing.T) {
	c, _ := load(t)
	lits := goStringLiterals(t)
	for _, name := range kedgeServices(c) {
		s := c.Services[name]
		t.Run(name, func(t *testing.T) {
			if len(s.Command) == 0 {
				t.Fatal("no command: the image's default would run")
			}
			env := map[string]string{}
			for k, v := range s.Environment {
				env[k] = expand(t, v)
			}
			args := make([]string, len(s.Command))
			for i, a := range s.Command {
				args[i] = expand(t, a)
			}
			p, err := runCLI(t, env, args)
			if err != nil {
				t.Fatal(err)
			}
			ms := mounts(t, name, s)
			for k, v := range env {
				if flag, ok := p.envs[k]; ok {
					got := fmt.Sprint(p.ctx.Value(flag))
					if _, slice := p.ctx.Value(flag).(cli.StringSlice); slice {
						got = strings.Join(p.ctx.StringSlice(flag), ",")
					}
					if got != v && !(v == "" && got == "") {
						t.Errorf("$%s=%q reached --%s as %q", k, v, flag, got)
					}
				} else if !lits[k] {
					t.Errorf("$%s is read by no flag of `kedge %s` and named nowhere in the code", k, args[0])
				}
				if path.IsAbs(v) {
					if _, _, ok := under(ms, v); !ok {
						t.Errorf("$%s=%s is not under any volume of the service", k, v)
					}
				}
			}
			// Every kedge command that talks to Temporal seals payloads:
			// it needs the key, from the operator's directory.
			if _, dials := p.envs["TEMPORAL_ADDRESS"]; dials {
				key := env["KEDGE_CODEC_KEY"]
				if m, _, ok := under(ms, key); key == "" || !ok || m.Repo {
					t.Errorf("no codec key from the operator's directory: KEDGE_CODEC_KEY=%q", key)
				}
				if env["TEMPORAL_ADDRESS"] != "temporal:7233" {
					t.Errorf("TEMPORAL_ADDRESS=%q, want the compose file's temporal:7233", env["TEMPORAL_ADDRESS"])
				}
			}
			for _, l := range []string{"listen", "metrics-listen"} {
				if v := p.ctx.String(l); p.ctx.IsSet(l) && v != "" {
					if host, _, err := net.SplitHostPort(v); err != nil || host != "0.0.0.0" {
						t.Errorf("--%s %s: a container must listen on 0.0.0.0 to be reachable", l, v)
					}
				}
			}
		})
	}
}

// listenPort is the port a service serves inside its container.
func listenPort(t *testing.T, c *compose, s *service, metrics bool) string {
	t.Helper()
	if !isKedge(c, s) {
		img, _ := program(t, c, s)
		return imagePort[img]
	}
	var addr string
	if metrics {
		addr = expand(t, s.Environment["KEDGE_METRICS_LISTEN"])
	} else if i := slices.Index(s.Command, "--listen"); i >= 0 && i+1 < len(s.Command) {
		addr = s.Command[i+1]
	}
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// Published and exposed ports are ones the services listen on; no two
// services publish the same host port; the worker publishes none, so it
// scales.
func TestComposePortsAreServed(t *testing.T) {
	c, _ := load(t)
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			parts := strings.Split(expand(t, p), ":")
			if len(parts) != 3 || net.ParseIP(parts[0]) == nil {
				t.Errorf("%s: port %q is not BIND_IP:HOST:CONTAINER", name, p)
				continue
			}
			if !strings.HasPrefix(p, "${KEDGE_BIND:-127.0.0.1}:") {
				t.Errorf("%s: port %q does not bind to ${KEDGE_BIND:-127.0.0.1}", name, p)
			}
			if want := listenPort(t, c, s, false); parts[2] != want {
				t.Errorf("%s: publishes container port %s, but it listens on %q", name, parts[2], want)
			}
			if other, dup := hostPorts[parts[1]]; dup {
				t.Errorf("%s and %s both publish host port %s", name, other, parts[1])
			}
			hostPorts[parts[1]] = name
		}
		for _, e := range s.Expose {
			if want := listenPort(t, c, s, true); e != want {
				t.Errorf("%s: exposes %s, but its metrics listen on %q", name, e, want)
			}
		}
	}
	if w := c.Services["kedge-worker"]; w == nil || len(w.Ports) > 0 || len(w.Expose) == 0 {
		t.Errorf("kedge-worker must exist, publish no host port (so it scales) and expose its metrics: %+v", w)
	}
	// The Web UI, its codec endpoint and the origin the codec allows
	// agree with one another and with the published ports.
	ui, codec := c.Services["temporal-ui"], c.Services["kedge-codec"]
	if ui == nil || codec == nil {
		t.Fatal("no temporal-ui or kedge-codec service")
	}
	uiURL := expand(t, ui.Environment["TEMPORAL_CORS_ORIGINS"])
	if u, err := url.Parse(uiURL); err != nil || hostPorts[u.Port()] != "temporal-ui" {
		t.Errorf("TEMPORAL_CORS_ORIGINS %s is not the Web UI's published port", uiURL)
	}
	codecURL := expand(t, ui.Environment["TEMPORAL_CODEC_ENDPOINT"])
	if u, err := url.Parse(codecURL); err != nil || hostPorts[u.Port()] != "kedge-codec" {
		t.Errorf("TEMPORAL_CODEC_ENDPOINT %s is not kedge-codec's published port", codecURL)
	}
	if i := slices.Index(codec.Command, "--ui-origin"); i < 0 || expand(t, codec.Command[i+1]) != uiURL {
		t.Errorf("kedge-codec does not allow the Web UI's origin %s: %v", uiURL, codec.Command)
	}
	for _, name := range kedgeServices(c) {
		if v, ok := c.Services[name].Environment["KEDGE_UI_URL"]; ok && expand(t, v) != uiURL {
			t.Errorf("%s: KEDGE_UI_URL %s is not the Web UI's %s", name, expand(t, v), uiURL)
		}
	}
}

// Whoever reaches the codec server reads every payload the Web UI's API
// hands out: it takes a token, from the operator's directory, and the
// Web UI sends its pages' calls to it with the browser's cookies (the
// session a login with the token set), linking to that login when a
// decode fails.
func TestComposeCodecServerNeedsItsToken(t *testing.T) {
	c, _ := load(t)
	ui, codec := c.Services["temporal-ui"], c.Services["kedge-codec"]
	if ui == nil || codec == nil {
		t.Fatal("no temporal-ui or kedge-codec service")
	}
	i := slices.Index(codec.Command, "--token-file")
	if i < 0 || i+1 >= len(codec.Command) {
		t.Fatalf("kedge-codec runs without --token-file: %v", codec.Command)
	}
	m, _, ok := under(mounts(t, "kedge-codec", codec), codec.Command[i+1])
	if !ok || m.Repo || !strings.HasPrefix(m.Source, "${KEDGE_DIR:-./kedge}/") || !m.ReadOnly {
		t.Errorf("kedge-codec's token %s is not mounted read-only from the operator's directory: %+v", codec.Command[i+1], m)
	}
	codecURL := expand(t, ui.Environment["TEMPORAL_CODEC_ENDPOINT"])
	if v := ui.Environment["TEMPORAL_CODEC_INCLUDE_CREDENTIALS"]; v != "true" {
		t.Errorf("TEMPORAL_CODEC_INCLUDE_CREDENTIALS=%q: the Web UI's pages would call the codec server without the session cookie", v)
	}
	if v := expand(t, ui.Environment["TEMPORAL_CODEC_DEFAULT_ERROR_LINK"]); v != codecURL+"/login" {
		t.Errorf("TEMPORAL_CODEC_DEFAULT_ERROR_LINK=%q, want the codec server's login %s/login", v, codecURL)
	}
	if msg := ui.Environment["TEMPORAL_CODEC_DEFAULT_ERROR_MESSAGE"]; strings.Contains(msg, ": ") || strings.Contains(msg, "#") {
		t.Errorf("TEMPORAL_CODEC_DEFAULT_ERROR_MESSAGE %q breaks the UI server's YAML config, where it goes unquoted", msg)
	}
}

// Named volumes are declared and used; bind mounts of the repository name
// paths that exist; scripts and config files a service names inside its
// mounts exist; the official images get only variables they read.
func TestComposeVolumesFilesAndEnvironment(t *testing.T) {
	c, _ := load(t)
	used := map[string]bool{}
	for name, s := range c.Services {
		ms := mounts(t, name, s)
		for _, m := range ms {
			switch {
			case m.Named:
				if _, ok := c.Volumes[m.Source]; !ok {
					t.Errorf("%s: volume %s is not declared under volumes:", name, m.Source)
				}
				used[m.Source] = true
			case m.Repo:
				if _, err := os.Stat(filepath.Join(root, m.Source)); err != nil {
					t.Errorf("%s: bind mount %s: %v", name, m.Source, err)
				}
			}
		}
		// Files named by absolute path in the entrypoint, command or
		// environment: those under a repository mount must exist.
		var named []string
		named = append(named, s.Entrypoint...)
		named = append(named, s.Command...)
		for _, v := range s.Environment {
			named = append(named, expand(t, v))
		}
		for _, p := range named {
			if !path.IsAbs(p) {
				continue
			}
			m, rel, ok := under(ms, p)
			if !ok || !m.Repo {
				continue
			}
			fi, err := os.Stat(filepath.Join(root, m.Source, rel))
			if err != nil {
				t.Errorf("%s names %s: %v", name, p, err)
				continue
			}
			if strings.HasSuffix(p, ".sh") && fi.Mode()&0o111 == 0 {
				t.Errorf("%s: script %s is not executable", name, p)
			}
		}
		if !isKedge(c, s) {
			known := imageEnv(t, c, s, ms)
			for k := range s.Environment {
				if !slices.Contains(known, k) {
					t.Errorf("%s: %s does not read $%s", name, s.Image, k)
				}
			}
		}
	}
	for v := range c.Volumes {
		if !used[v] {
			t.Errorf("volume %s is declared but no service mounts it", v)
		}
	}
	// The server's dynamic config: every key one Temporal knows, every
	// value valid.
	srv := c.Services["temporal"]
	p := srv.Environment["DYNAMIC_CONFIG_FILE_PATH"]
	m, rel, ok := under(mounts(t, "temporal", srv), p)
	if !ok || !m.Repo {
		t.Fatalf("DYNAMIC_CONFIG_FILE_PATH %s is not a file of this repository", p)
	}
	data, err := os.ReadFile(filepath.Join(root, m.Source, rel))
	if err != nil {
		t.Fatal(err)
	}
	lr := dynamicconfig.LoadYamlFile(data)
	if err := lr.Err(); err != nil {
		t.Errorf("%s: %v", p, err)
	}
	for _, w := range lr.Warnings {
		t.Errorf("%s: %v", p, w)
	}
	if len(lr.Map) == 0 {
		t.Errorf("%s sets nothing", p)
	}
}

// Each service gets only its own secrets from the operator's directory:
// the worker all of it (SSH key, Vault token, kubeconfigs), the webhook —
// the one service facing the internet — the codec key, the inventories
// and its own directory; each client of Temporal the CA and its own
// certificate and key (mutual TLS), the server its own.
func TestComposeSecretsReachOnlyTheirService(t *testing.T) {
	c, _ := load(t)
	tls := func(client string) []string {
		return []string{"/tls/ca.pem", "/tls/" + client + ".key", "/tls/" + client + ".pem"}
	}
	want := map[string][]string{
		"kedge-worker":  {""},
		"kedge-webhook": append([]string{"/clusters", "/codec.key"}, append(tls("kedge-webhook"), "/webhook")...),
		"kedge-setup":   append([]string{"/codec.key"}, tls("kedge-setup")...),
		"kedge-codec":   {"/codec-token", "/codec.key"},
		"temporal":      tls("server"),
		"temporal-ui":   tls("temporal-ui"),
	}
	for name, s := range c.Services {
		var got []string
		for _, m := range mounts(t, name, s) {
			if rest, ok := strings.CutPrefix(m.Source, "${KEDGE_DIR:-./kedge}"); ok {
				got = append(got, rest)
			} else if strings.Contains(m.Source, "KEDGE_DIR") {
				t.Errorf("%s mounts the operator's directory as %q", name, m.Source)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s mounts %q of the operator's directory, want %q", name, got, want[name])
		}
	}
}

// Start order: one-shot jobs are waited for until they complete, servers
// until they are healthy, and nothing kedge starts before `kedge setup`
// has registered the search attributes its workflows set.
func TestComposeStartOrder(t *testing.T) {
	c, _ := load(t)
	for name, s := range c.Services {
		for dep, d := range s.DependsOn {
			ds, ok := c.Services[dep]
			if !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
				continue
			}
			oneShot := strings.HasPrefix(ds.Restart, "on-failure")
			switch d.Condition {
			case "service_completed_successfully":
				if !oneShot {
					t.Errorf("%s waits for %s to complete, but %s is a server (restart %q)", name, dep, dep, ds.Restart)
				}
			case "service_healthy":
				if ds.Healthcheck == nil {
					t.Errorf("%s waits for %s to be healthy, but it has no healthcheck", name, dep)
				}
			default:
				t.Errorf("%s: depends_on %s has condition %q", name, dep, d.Condition)
			}
		}
	}
	setup := c.Services["kedge-setup"]
	if setup == nil || len(setup.Command) == 0 || setup.Command[0] != "setup" {
		t.Fatalf("no kedge-setup service running `kedge setup`: %+v", setup)
	}
	for _, name := range kedgeServices(c) {
		if name == "kedge-setup" {
			continue
		}
		if d, ok := c.Services[name].DependsOn["kedge-setup"]; !ok || d.Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for kedge-setup to complete", name)
		}
	}
}

// Every variable an operator may set is documented in the README's Team
// install section, with its default.
func TestComposeVariablesAreDocumented(t *testing.T) {
	_, raw := load(t)
	readme := readFile(t, "README.md")
	start := strings.Index(readme, "## Team install")
	if start < 0 {
		t.Fatal("README.md has no \"## Team install\" section")
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	defaults := map[string]string{}
	for _, r := range composefile.Refs(raw) {
		if prev, ok := defaults[r.Name]; ok && prev != r.Default {
			t.Errorf("${%s} has two defaults: %q and %q", r.Name, prev, r.Default)
		}
		defaults[r.Name] = r.Default
	}
	for v, def := range defaults {
		row := regexp.MustCompile("(?m)^\\| `" + v + "` \\|([^\n]*)$").FindStringSubmatch(section)
		if row == nil {
			t.Errorf("README's Team install table has no row for `%s`", v)
			continue
		}
		if def != "" && !strings.Contains(row[1], "`"+def+"`") {
			t.Errorf("README's row for `%s` does not give its default `%s`: %s", v, def, row[0])
		}
	}
	if n := len(defaults); n < 5 {
		t.Errorf("only %d variables found: %v", n, defaults)
	}
}
