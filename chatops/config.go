package chatops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"kedge.dev/kedge/fleetlock"
	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/internal/secretfile"
	"kedge.dev/kedge/runbooks/source"
)

// APIVersion and Kind identify the authorization config.
const (
	APIVersion = "kedge/v1"
	Kind       = "ChatOps"
)

// Any in a rule's clusters, start, approve or restore list matches every
// name.
const Any = "*"

// minSecretLen is the shortest HMAC key accepted.
const minSecretLen = 16

// Config is a validated authorization config.
type Config struct {
	File string
	// Clusters maps the cluster names chat may use to inventory files
	// (absolute paths).
	Clusters map[string]string
	// RunbookPath is searched for runbooks by name before the built-ins.
	RunbookPath []string
	// FleetLock is, by cluster, how its FleetLock endpoint works (only
	// the clusters that have a fleetLock section serve one).
	FleetLock map[string]FleetLockConfig
	// ResponseURLs are URL prefixes a Slack response_url must start with to
	// be posted to.
	ResponseURLs []string
	Rules        []Rule
	keys         map[string][]byte // webhook key name -> secret
}

// Rule grants who may start, approve and restore which runbooks on which
// clusters.
type Rule struct {
	Name          string
	Pos           source.Pos
	SlackUsers    []string
	SlackChannels []string
	WebhookKeys   []string
	Clusters      []string
	Start         []string
	Approve       []string
	Restore       []string
}

var (
	slackIDRE = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_]{1,31}$`)
	plainRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
)

// LoadConfig reads and validates a config file. Every problem is reported
// as FILE:LINE:COL: message, all of them at once. Secrets the config
// points at (secretFile, secretEnv) are read here; no message ever holds
// one.
func LoadConfig(path string) (*Config, error) {
	docs, err := source.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, source.Errors{{Pos: source.At(path, docs[1].Root), Msg: "a ChatOps config holds one document"}}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	return decodeConfig(docs[0], dir, os.LookupEnv)
}

func decodeConfig(doc source.Document, dir string, env func(string) (string, bool)) (*Config, error) {
	f := doc.File
	var errs source.Errors
	c := &Config{File: f, Clusters: map[string]string{}, FleetLock: map[string]FleetLockConfig{}, keys: map[string][]byte{}}
	var apiVersion, kind string
	var ruleNodes []*yaml.Node
	source.Fields(f, doc.Root, "ChatOps config", &errs, map[string]func(*yaml.Node){
		"apiVersion": func(v *yaml.Node) { apiVersion = source.String(f, v, "apiVersion", &errs) },
		"kind":       func(v *yaml.Node) { kind = source.String(f, v, "kind", &errs) },
		"clusters": func(v *yaml.Node) {
			for _, p := range source.Pairs(f, v, "clusters", &errs) {
				name := p.Key.Value
				for _, msg := range validation.IsDNS1123Label(name) {
					errs.Addf(source.At(f, p.Key), "cluster name %q: %s", name, msg)
				}
				var inv string
				source.Fields(f, p.Value, "clusters."+name, &errs, map[string]func(*yaml.Node){
					"inventory": func(v *yaml.Node) { inv = source.String(f, v, "clusters."+name+".inventory", &errs) },
					"fleetLock": func(v *yaml.Node) {
						if fc, ok := decodeFleetLock(f, v, dir, "clusters."+name+".fleetLock", &errs); ok {
							c.FleetLock[name] = fc
						}
					},
				})
				if inv == "" {
					errs.Addf(source.At(f, p.Value), "clusters.%s.inventory is required (the cluster's inventory file)", name)
					continue
				}
				inv = resolvePath(dir, inv)
				if _, err := os.Stat(inv); err != nil {
					errs.Addf(source.At(f, p.Value), "clusters.%s.inventory: %s does not exist", name, inv)
				}
				c.Clusters[name] = inv
			}
		},
		"runbookPath": func(v *yaml.Node) {
			for _, d := range source.Strings(f, v, "runbookPath", &errs) {
				c.RunbookPath = append(c.RunbookPath, resolvePath(dir, d))
			}
		},
		"responseURLs": func(v *yaml.Node) {
			for i, u := range source.Strings(f, v, "responseURLs", &errs) {
				if _, err := responseurl.ParsePrefix(u); err != nil {
					errs.Addf(source.At(f, v.Content[i]), "responseURLs: %v", err)
				}
				c.ResponseURLs = append(c.ResponseURLs, u)
			}
		},
		"webhookKeys": func(v *yaml.Node) {
			for _, p := range source.Pairs(f, v, "webhookKeys", &errs) {
				name := p.Key.Value
				if !plainRE.MatchString(name) {
					errs.Addf(source.At(f, p.Key), "webhook key name %q: lowercase letters, digits, '.', '_' and '-' only", name)
				}
				what := "webhookKeys." + name
				var file, envName string
				var fileNode, envNode *yaml.Node
				source.Fields(f, p.Value, what, &errs, map[string]func(*yaml.Node){
					"secretFile": func(v *yaml.Node) { file, fileNode = source.String(f, v, what+".secretFile", &errs), v },
					"secretEnv":  func(v *yaml.Node) { envName, envNode = source.String(f, v, what+".secretEnv", &errs), v },
				})
				var secret string
				switch {
				case (file == "") == (envName == ""):
					errs.Addf(source.At(f, p.Value), "%s needs one of secretFile or secretEnv (the secret itself never goes in this file)", what)
					continue
				case file != "":
					data, err := secretfile.Read(resolvePath(dir, file))
					var me *secretfile.ModeError
					var oe *secretfile.OwnerError
					if errors.As(err, &me) || errors.As(err, &oe) {
						errs.Addf(source.At(f, fileNode), "%s.secretFile: %v", what, err)
						continue
					}
					if err != nil {
						errs.Addf(source.At(f, fileNode), "%s.secretFile: cannot read %s", what, resolvePath(dir, file))
						continue
					}
					secret = strings.TrimSpace(string(data))
				default:
					val, ok := env(envName)
					if !ok {
						errs.Addf(source.At(f, envNode), "%s.secretEnv: $%s is not set", what, envName)
						continue
					}
					secret = strings.TrimSpace(val)
				}
				if len(secret) < minSecretLen {
					at := fileNode
					if at == nil {
						at = envNode
					}
					errs.Addf(source.At(f, at), "%s: the secret is shorter than %d bytes", what, minSecretLen)
					continue
				}
				c.keys[name] = []byte(secret)
			}
		},
		"allow": func(v *yaml.Node) {
			if v.Kind != yaml.SequenceNode {
				errs.Addf(source.At(f, v), "allow must be a list of rules, got %s", source.KindName(v))
				return
			}
			ruleNodes = v.Content
		},
	})
	if apiVersion != APIVersion {
		errs.Addf(source.At(f, doc.Root), "apiVersion must be %s, got %q", APIVersion, apiVersion)
	}
	if kind != Kind {
		errs.Addf(source.At(f, doc.Root), "kind must be %s, got %q", Kind, kind)
	}
	for i, n := range ruleNodes {
		c.Rules = append(c.Rules, c.decodeRule(f, i, n, &errs))
	}
	if len(c.ResponseURLs) == 0 {
		c.ResponseURLs = slices.Clone(responseurl.DefaultPrefixes)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// FleetLockConfig is a cluster's FleetLock endpoint.
type FleetLockConfig struct {
	// Key derives each node's token (fleetlock.Token): read from
	// keyFile, never written in the config.
	Key []byte
	// Slots is how many nodes may be out at once (default 1).
	Slots int
	// LostAfter is how long a node granted its reboot may take to report
	// steady-state before its slot waits for a person (default 30m).
	LostAfter time.Duration
	// DrainTimeout bounds the drain of a node before its reboot (the
	// fleetlock-drain runbook's drainTimeout); 0 is that runbook's
	// default (5m).
	DrainTimeout time.Duration
}

// MaxFleetLockDrainTimeout is the longest drainTimeout a config may set:
// the built-in fleetlock-drain runbook's drain step stops at 30m.
const MaxFleetLockDrainTimeout = 30 * time.Minute

func decodeFleetLock(f string, v *yaml.Node, dir, what string, errs *source.Errors) (FleetLockConfig, bool) {
	fc := FleetLockConfig{Slots: 1}
	var keyFile string
	var keyNode *yaml.Node
	source.Fields(f, v, what, errs, map[string]func(*yaml.Node){
		"keyFile":   func(v *yaml.Node) { keyFile, keyNode = source.String(f, v, what+".keyFile", errs), v },
		"slots":     func(v *yaml.Node) { fc.Slots = source.Int(f, v, what+".slots", errs) },
		"lostAfter": func(v *yaml.Node) { fc.LostAfter = positiveDuration(f, v, what+".lostAfter", 0, "", errs) },
		"drainTimeout": func(v *yaml.Node) {
			fc.DrainTimeout = positiveDuration(f, v, what+".drainTimeout", MaxFleetLockDrainTimeout,
				"the fleetlock-drain runbook's drain step stops then", errs)
		},
	})
	if fc.Slots < 1 {
		errs.Addf(source.At(f, v), "%s.slots must be at least 1", what)
	}
	if keyFile == "" {
		errs.Addf(source.At(f, v), "%s.keyFile is required (the key each node's token is derived from)", what)
		return fc, false
	}
	data, err := secretfile.Read(resolvePath(dir, keyFile))
	if err != nil {
		errs.Addf(source.At(f, keyNode), "%s.keyFile: %v", what, err)
		return fc, false
	}
	fc.Key = []byte(strings.TrimSpace(string(data)))
	if len(fc.Key) < fleetlock.MinKeyLen {
		errs.Addf(source.At(f, keyNode), "%s.keyFile: the key is shorter than %d bytes", what, fleetlock.MinKeyLen)
		return fc, false
	}
	return fc, true
}

// positiveDuration decodes a duration that must be more than 0 and, when
// most is set, at most most (why says why).
func positiveDuration(f string, v *yaml.Node, what string, most time.Duration, why string, errs *source.Errors) time.Duration {
	before := len(*errs)
	d := source.Duration(f, v, what, errs)
	switch {
	case len(*errs) > before: // not a duration, or negative: said already
	case d == 0:
		errs.Addf(source.At(f, v), "%s must be more than 0", what)
	case most > 0 && d > most:
		errs.Addf(source.At(f, v), "%s must be at most %s (%s), got %s", what, most, why, d)
	}
	return d
}

func (c *Config) decodeRule(f string, i int, n *yaml.Node, errs *source.Errors) Rule {
	r := Rule{Pos: source.At(f, n), Name: fmt.Sprintf("allow[%d]", i)}
	what := r.Name
	ids := func(dst *[]string, field string, check func(string) bool, want string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			*dst = source.Strings(f, v, what+"."+field, errs)
			for j, s := range *dst {
				if !check(s) {
					errs.Addf(source.At(f, v.Content[j]), "%s.%s: %q is not %s", what, field, s, want)
				}
			}
		}
	}
	clusterOK := func(s string) bool { _, ok := c.Clusters[s]; return ok || s == Any }
	keyOK := func(s string) bool { _, ok := c.keys[s]; return ok }
	runbookOK := func(s string) bool { return s == Any || plainRE.MatchString(s) }
	source.Fields(f, n, what, errs, map[string]func(*yaml.Node){
		"name": func(v *yaml.Node) {
			if s := source.String(f, v, what+".name", errs); s != "" {
				r.Name = s
			}
		},
		"slackUsers":    ids(&r.SlackUsers, "slackUsers", slackIDRE.MatchString, "a Slack user ID (U0123ABCD)"),
		"slackChannels": ids(&r.SlackChannels, "slackChannels", slackIDRE.MatchString, "a Slack channel ID (C0123ABCD)"),
		"webhookKeys":   ids(&r.WebhookKeys, "webhookKeys", keyOK, "a key under webhookKeys"),
		"clusters":      ids(&r.Clusters, "clusters", clusterOK, "a cluster under clusters (or \"*\")"),
		"start":         ids(&r.Start, "start", runbookOK, "a runbook name (or \"*\")"),
		"approve":       ids(&r.Approve, "approve", runbookOK, "a runbook name (or \"*\")"),
		"restore":       ids(&r.Restore, "restore", runbookOK, "a runbook name (or \"*\")"),
	})
	if n.Kind == yaml.MappingNode {
		if len(r.SlackUsers)+len(r.SlackChannels)+len(r.WebhookKeys) == 0 {
			errs.Addf(r.Pos, "%s grants nobody: name slackUsers, slackChannels or webhookKeys", what)
		}
		if len(r.Clusters) == 0 {
			errs.Addf(r.Pos, "%s needs clusters (names, or \"*\")", what)
		}
		if len(r.Start)+len(r.Approve)+len(r.Restore) == 0 {
			errs.Addf(r.Pos, "%s grants nothing: name runbooks under start, approve or restore", what)
		}
	}
	return r
}

func resolvePath(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// key returns the secret of a webhook key.
func (c *Config) key(name string) ([]byte, bool) {
	k, ok := c.keys[name]
	return k, ok
}

// responseURLAllowed says whether progress may be posted to u: its scheme
// and host (port included) are exactly a prefix's, and its path starts
// with the prefix's path, as parsed URLs (a string prefix would let
// https://hooks.slack.com.evil.example through).
func (c *Config) responseURLAllowed(u string) bool {
	return responseurl.Allowed(c.ResponseURLs, u)
}

// ResponseURLCheck is the check a worker applies to chat.follow's
// response_url: the prefixes as in the config's responseURLs (none:
// responseurl.DefaultPrefixes).
func ResponseURLCheck(prefixes []string) (func(string) bool, error) {
	if len(prefixes) == 0 {
		prefixes = responseurl.DefaultPrefixes
	}
	for _, p := range prefixes {
		if _, err := responseurl.ParsePrefix(p); err != nil {
			return nil, err
		}
	}
	prefixes = slices.Clone(prefixes)
	return func(u string) bool { return responseurl.Allowed(prefixes, u) }, nil
}
