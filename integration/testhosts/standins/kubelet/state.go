package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// podState is what the simulator records of a static pod, in
// STATE-DIR/NS_NAME.json, so that the next kubelet finds its containers.
type podState struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Hash is the hash of the manifest the containers were started from.
	Hash     string `json:"hash"`
	Manifest string `json:"manifest"`
	// GraceSeconds is how long a stop waits between SIGTERM and SIGKILL.
	GraceSeconds int64            `json:"graceSeconds"`
	Containers   []containerState `json:"containers"`
}

type containerState struct {
	Name       string    `json:"name"`
	PID        int       `json:"pid,omitempty"`
	StartTicks uint64    `json:"startTicks,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	Restarts   int       `json:"restarts"`
	Argv       []string  `json:"argv,omitempty"`
}

func statePath(dir, key string) string { return filepath.Join(dir, key+".json") }

func writeState(dir string, s podState) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	path := statePath(dir, podKey(s.Namespace, s.Name))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readStates reads every pod state in dir; unreadable files are skipped.
func readStates(dir string) []podState {
	entries, _ := os.ReadDir(dir)
	var states []podState
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var s podState
		if json.Unmarshal(data, &s) == nil && s.Name != "" {
			states = append(states, s)
		}
	}
	return states
}
