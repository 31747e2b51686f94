package chatops

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A chat user or webhook key that may start a runbook whose author built
// host.run's command from a param by one expression: the start is refused
// when the runbook is validated, before anything reaches Temporal, so
// `x; touch /root/owned` never reaches a root shell.
func TestStartRefusesARunbookThatBuildsShellTextFromAParam(t *testing.T) {
	c := loadGood(t)
	dir := t.TempDir()
	rb := `apiVersion: kedge/v1
kind: Runbook
metadata: {name: greet}
params:
  message: {type: string, required: true}
steps:
  - id: say
    action: host.run
    on: worker-1
    with: {command: "${ 'echo ' + params.message }"}
`
	if err := os.WriteFile(filepath.Join(dir, "greet.yaml"), []byte(rb), 0o644); err != nil {
		t.Fatal(err)
	}
	c.RunbookPath = []string{dir}
	s := &Server{Config: c}
	sre := Subject{Source: SourceSlack, UserID: "U0SRE"}
	_, err := s.prepare(&startRequest{Subject: sre, Runbook: "greet", Cluster: "mercury", Params: map[string]any{"message": "x; touch /root/owned"}})
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusUnprocessableEntity || !strings.Contains(he.Msg, "interpolates ${ 'echo ' + params.message } into shell text") {
		t.Fatalf("start of a runbook building its command from a param: %v", err)
	}
}
