package runbooks

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"kedge.dev/kedge/runbooks/source"
)

// decode turns one YAML document into a Runbook, reporting shape errors
// (unknown fields, wrong types). Semantic checks are in validate.go.
func decode(doc source.Document) (*Runbook, source.Errors) {
	f := doc.File
	var errs source.Errors
	rb := &Runbook{File: f, src: &runbookSource{file: f, root: doc.Root, params: map[string]*paramSource{}}}
	var apiVersion, kind string
	source.Fields(f, doc.Root, "runbook", &errs, map[string]func(*yaml.Node){
		"apiVersion": func(v *yaml.Node) { apiVersion = source.String(f, v, "apiVersion", &errs) },
		"kind":       func(v *yaml.Node) { kind = source.String(f, v, "kind", &errs) },
		"metadata": func(v *yaml.Node) {
			source.Fields(f, v, "metadata", &errs, map[string]func(*yaml.Node){
				"name":        func(v *yaml.Node) { rb.Name = source.String(f, v, "metadata.name", &errs) },
				"description": func(v *yaml.Node) { rb.Description = source.String(f, v, "metadata.description", &errs) },
				"internal":    func(v *yaml.Node) { rb.Internal = source.Bool(f, v, "metadata.internal", &errs) },
			})
		},
		"params": func(v *yaml.Node) {
			for _, p := range source.Pairs(f, v, "params", &errs) {
				rb.Params = append(rb.Params, decodeParam(f, p, rb.src, &errs))
			}
		},
		"outputs": func(v *yaml.Node) {
			rb.Outputs, rb.src.outputs = map[string]string{}, map[string]*yaml.Node{}
			for _, o := range source.Pairs(f, v, "outputs", &errs) {
				rb.Outputs[o.Key.Value] = source.String(f, o.Value, "outputs."+o.Key.Value, &errs)
				rb.src.outputs[o.Key.Value] = o.Value
			}
		},
		"steps": func(v *yaml.Node) {
			if v.Kind != yaml.SequenceNode {
				errs.Addf(source.At(f, v), "steps must be a list, got %s", source.KindName(v))
				return
			}
			for _, item := range v.Content {
				s, ss := decodeStep(f, item, &errs)
				rb.Steps = append(rb.Steps, s)
				rb.src.steps = append(rb.src.steps, ss)
			}
		},
	})
	top := source.At(f, doc.Root)
	if apiVersion != APIVersion {
		errs.Addf(top, "apiVersion must be %q, got %q", APIVersion, apiVersion)
	}
	if kind != Kind {
		errs.Addf(top, "kind must be %q, got %q", Kind, kind)
	}
	if rb.Name == "" {
		errs.Addf(top, "metadata.name is required")
	}
	if len(rb.Steps) == 0 {
		errs.Addf(top, "a runbook needs at least one step")
	}
	return rb, errs
}

func decodeParam(f string, kv source.Field, src *runbookSource, errs *source.Errors) Param {
	p := Param{Name: kv.Key.Value}
	ps := &paramSource{key: kv.Key}
	src.params[p.Name] = ps
	source.Fields(f, kv.Value, "param "+p.Name, errs, map[string]func(*yaml.Node){
		"type":        func(v *yaml.Node) { p.Type = source.String(f, v, "type", errs); ps.typ = v },
		"required":    func(v *yaml.Node) { p.Required = source.Bool(f, v, "required", errs) },
		"default":     func(v *yaml.Node) { p.Default = source.Value(f, v, errs); ps.def = v },
		"description": func(v *yaml.Node) { p.Description = source.String(f, v, "description", errs) },
		"secret":      func(v *yaml.Node) { p.Secret = source.Bool(f, v, "secret", errs) },
	})
	return p
}

func decodeStep(f string, n *yaml.Node, errs *source.Errors) (Step, *stepSource) {
	var s Step
	ss := &stepSource{node: n, fields: map[string]*yaml.Node{}}
	field := func(name string, h func(v *yaml.Node)) func(v *yaml.Node) {
		return func(v *yaml.Node) { ss.fields[name] = v; h(v) }
	}
	source.Fields(f, n, "step", errs, map[string]func(*yaml.Node){
		"id":   field("id", func(v *yaml.Node) { s.ID = source.String(f, v, "id", errs) }),
		"name": field("name", func(v *yaml.Node) { s.Name = source.String(f, v, "name", errs) }),
		"needs": field("needs", func(v *yaml.Node) {
			if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
				s.Needs, ss.needs = []string{v.Value}, []*yaml.Node{v}
				return
			}
			s.Needs = source.Strings(f, v, "needs", errs)
			ss.needs = v.Content
		}),
		"action":  field("action", func(v *yaml.Node) { s.Action = source.String(f, v, "action", errs) }),
		"runbook": field("runbook", func(v *yaml.Node) { s.Runbook = source.String(f, v, "runbook", errs) }),
		"approval": field("approval", func(v *yaml.Node) {
			s.Approval = &Approval{}
			source.Fields(f, v, "approval", errs, map[string]func(*yaml.Node){
				"prompt": func(v *yaml.Node) {
					s.Approval.Prompt = source.String(f, v, "approval.prompt", errs)
					ss.prompt = v
				},
				"preview": func(v *yaml.Node) {
					s.Approval.Preview = source.Bool(f, v, "approval.preview", errs)
					ss.preview = v
				},
			})
		}),
		"on": field("on", func(v *yaml.Node) { s.On = source.String(f, v, "on", errs) }),
		"with": field("with", func(v *yaml.Node) {
			s.With, ss.withKeys, ss.withVals = decodeWith(f, v, errs)
		}),
		"when": field("when", func(v *yaml.Node) { s.When = source.String(f, v, "when", errs) }),
		"phase": field("phase", func(v *yaml.Node) {
			if s.Phase = source.String(f, v, "phase", errs); s.Phase != PhaseRestore {
				errs.Addf(source.At(f, v), "phase must be %s (a step run only after a person decides restore at a pause), got %q", PhaseRestore, s.Phase)
			}
		}),
		"timeout": field("timeout", func(v *yaml.Node) { s.Timeout = source.Duration(f, v, "timeout", errs) }),
		"retry": field("retry", func(v *yaml.Node) {
			s.Retry = &Retry{}
			r := s.Retry
			source.Fields(f, v, "retry", errs, map[string]func(*yaml.Node){
				"maxAttempts": func(v *yaml.Node) {
					if r.MaxAttempts = source.Int(f, v, "retry.maxAttempts", errs); r.MaxAttempts < 1 {
						errs.Addf(source.At(f, v), "retry.maxAttempts must be at least 1")
					}
				},
				"initialInterval": func(v *yaml.Node) { r.InitialInterval = source.Duration(f, v, "retry.initialInterval", errs) },
				"maxInterval":     func(v *yaml.Node) { r.MaxInterval = source.Duration(f, v, "retry.maxInterval", errs) },
				"backoff": func(v *yaml.Node) {
					if r.Backoff = source.Float(f, v, "retry.backoff", errs); r.Backoff < 1 {
						errs.Addf(source.At(f, v), "retry.backoff must be at least 1.0")
					}
				},
			})
			if r.InitialInterval > 0 && r.MaxInterval > 0 && r.MaxInterval < r.InitialInterval {
				errs.Addf(source.At(f, v), "retry.maxInterval (%s) is shorter than retry.initialInterval (%s)", r.MaxInterval, r.InitialInterval)
			}
		}),
		"undo": field("undo", func(v *yaml.Node) {
			items := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				items = v.Content
			}
			for _, item := range items {
				var u Undo
				us := undoSource{node: item, fields: map[string]*yaml.Node{}}
				source.Fields(f, item, "undo", errs, map[string]func(*yaml.Node){
					"action": func(v *yaml.Node) { u.Action = source.String(f, v, "undo.action", errs); us.fields["action"] = v },
					"on":     func(v *yaml.Node) { u.On = source.String(f, v, "undo.on", errs); us.fields["on"] = v },
					"with": func(v *yaml.Node) {
						u.With, us.keys, us.vals = decodeWith(f, v, errs)
						us.fields["with"] = v
					},
				})
				s.Undo = append(s.Undo, u)
				ss.undos = append(ss.undos, us)
			}
		}),
		"rollout": field("rollout", func(v *yaml.Node) {
			s.Rollout = &Rollout{}
			ss.rollout = map[string]*yaml.Node{}
			scalar := func(name string, dst *string) func(v *yaml.Node) {
				return func(v *yaml.Node) {
					ss.rollout[name] = v
					if v.Kind == yaml.ScalarNode && (v.Tag == "!!int" || v.Tag == "!!str") {
						*dst = v.Value
						return
					}
					errs.Addf(source.At(f, v), "rollout.%s must be a number or an expression, got %s", name, source.KindName(v))
				}
			}
			source.Fields(f, v, "rollout", errs, map[string]func(*yaml.Node){
				"over":           func(v *yaml.Node) { s.Rollout.Over = source.String(f, v, "rollout.over", errs); ss.rollout["over"] = v },
				"maxUnavailable": scalar("maxUnavailable", &s.Rollout.MaxUnavailable),
				"failureBudget":  scalar("failureBudget", &s.Rollout.FailureBudget),
				"everyItemFailed": func(v *yaml.Node) {
					ss.rollout["everyItemFailed"] = v
					s.Rollout.EveryItemFailed = source.String(f, v, "rollout.everyItemFailed", errs)
				},
				"delay": func(v *yaml.Node) {
					s.Rollout.Delay = source.String(f, v, "rollout.delay", errs)
					ss.rollout["delay"] = v
				},
				"window": func(v *yaml.Node) { s.Rollout.Window = decodeWindow(f, v, ss.rollout, errs) },
				"alerts": func(v *yaml.Node) { s.Rollout.Alerts = decodeAlerts(f, v, ss.rollout, errs) },
			})
		}),
	})
	return s, ss
}

// decodeWindow reads a rollout's window: schedule, duration and
// timeZone strings (literals or expressions), blackouts a list of dates
// or an expression. Each field's node is kept as "window.FIELD".
func decodeWindow(f string, v *yaml.Node, nodes map[string]*yaml.Node, errs *source.Errors) *RolloutWindow {
	w := &RolloutWindow{}
	nodes["window"] = v
	str := func(name string, dst *string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			nodes["window."+name] = v
			*dst = source.String(f, v, "rollout.window."+name, errs)
		}
	}
	source.Fields(f, v, "rollout.window", errs, map[string]func(*yaml.Node){
		"schedule": str("schedule", &w.Schedule),
		"duration": str("duration", &w.Duration),
		"timeZone": str("timeZone", &w.TimeZone),
		"blackouts": func(v *yaml.Node) {
			nodes["window.blackouts"] = v
			if v.Kind != yaml.SequenceNode {
				w.Blackouts = source.String(f, v, "rollout.window.blackouts", errs)
				return
			}
			w.List = []string{}
			for i, e := range v.Content {
				w.List = append(w.List, source.String(f, e, fmt.Sprintf("rollout.window.blackouts[%d]", i), errs))
			}
		},
	})
	return w
}

// decodeAlerts reads a rollout's alert gate: url, recheck and pauseAfter
// strings (literals or expressions), names a list of alert names or an
// expression. Each field's node is kept as "alerts.FIELD".
func decodeAlerts(f string, v *yaml.Node, nodes map[string]*yaml.Node, errs *source.Errors) *RolloutAlerts {
	a := &RolloutAlerts{}
	nodes["alerts"] = v
	str := func(name string, dst *string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			nodes["alerts."+name] = v
			*dst = source.String(f, v, "rollout.alerts."+name, errs)
		}
	}
	source.Fields(f, v, "rollout.alerts", errs, map[string]func(*yaml.Node){
		"url":        str("url", &a.URL),
		"recheck":    str("recheck", &a.Recheck),
		"pauseAfter": str("pauseAfter", &a.PauseAfter),
		"names": func(v *yaml.Node) {
			nodes["alerts.names"] = v
			if v.Kind != yaml.SequenceNode {
				a.Names = source.String(f, v, "rollout.alerts.names", errs)
				return
			}
			a.List = []string{}
			for i, e := range v.Content {
				a.List = append(a.List, source.String(f, e, fmt.Sprintf("rollout.alerts.names[%d]", i), errs))
			}
		},
	})
	return a
}

func decodeWith(f string, v *yaml.Node, errs *source.Errors) (map[string]any, map[string]*yaml.Node, map[string]*yaml.Node) {
	with := map[string]any{}
	keys := map[string]*yaml.Node{}
	vals := map[string]*yaml.Node{}
	for _, kv := range source.Pairs(f, v, "with", errs) {
		with[kv.Key.Value] = source.Value(f, kv.Value, errs)
		keys[kv.Key.Value] = kv.Key
		vals[kv.Key.Value] = kv.Value
	}
	return with, keys, vals
}
