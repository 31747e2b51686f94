package actions

import (
	"fmt"
	"strings"
	"text/template"
)

// Summarize is the line the Web UI's timeline shows for one call of the
// action on host (empty for actions without `on:`). The Summary template
// reads names and paths from the input, never content, commands or
// credentials, through a Call.
func (a Action) Summarize(host string, input map[string]any) string {
	t := summaries[a.Name]
	if t == nil {
		return a.Name + Call{Host: host}.On()
	}
	var b strings.Builder
	if err := t.Execute(&b, Call{Host: host, Input: input}); err != nil {
		return a.Name + " (" + err.Error() + ")"
	}
	return b.String()
}

// Call is what a Summary template sees of one call.
type Call struct {
	// Host is the host or node the call acts on ("" without `on:`).
	Host  string
	Input map[string]any
}

// In is the input's string k ("" when absent or not a string).
func (c Call) In(k string) string {
	s, _ := c.Input[k].(string)
	return s
}

// Flag is the input's bool k.
func (c Call) Flag(k string) bool {
	b, _ := c.Input[k].(bool)
	return b
}

// Has says whether the input has k.
func (c Call) Has(k string) bool {
	_, ok := c.Input[k]
	return ok
}

// Count is "1 noun" or "N nouns" for the input's list k.
func (c Call) Count(k, noun string) string {
	n := 0
	if l, ok := c.Input[k].([]any); ok {
		n = len(l)
	}
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// On is " on HOST", or nothing without a host.
func (c Call) On() string {
	if c.Host == "" {
		return ""
	}
	return " on " + c.Host
}

// summaries holds every action's Summary, parsed once.
var summaries = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, a := range table {
		if a.Summary != "" {
			m[a.Name] = template.Must(template.New(a.Name).Option("missingkey=error").Parse(a.Summary))
		}
	}
	return m
}()
