package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The Ready condition of a node whose runtime has no network: the real
// kubelet's reason and message when containerd finds no CNI config.
const (
	notReadyReason  = "KubeletNotReady"
	notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
)

// networkConfig is the CNI network the container runtime would load from
// dir, as containerd does: the first file by name ending in .conf,
// .conflist or .json that holds a valid config (a list with a name and
// plugins that each have a type; a single config with a type). "" with
// the reason when there is none.
func networkConfig(dir string) (file, why string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Sprintf("no CNI config directory %s", dir)
	}
	var names []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	var problems []string
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if err := validCNIConfig(data, filepath.Ext(name) == ".conflist"); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		return filepath.Join(dir, name), ""
	}
	if len(problems) == 0 {
		return "", fmt.Sprintf("no network config found in %s", dir)
	}
	return "", strings.Join(problems, "; ")
}

// validCNIConfig checks a config's JSON as libcni loads it: a list needs a
// name and at least one plugin, and every plugin (or the single config) a
// type.
func validCNIConfig(data []byte, list bool) error {
	type plugin struct {
		Type string `json:"type"`
	}
	var conf struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Plugins []plugin `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		return fmt.Errorf("not a CNI config: %w", err)
	}
	if !list {
		if conf.Type == "" {
			return fmt.Errorf("error parsing configuration: missing 'type'")
		}
		return nil
	}
	if conf.Name == "" {
		return fmt.Errorf("error parsing configuration list: no name")
	}
	if len(conf.Plugins) == 0 {
		return fmt.Errorf("error parsing configuration list: no plugins in list")
	}
	for i, p := range conf.Plugins {
		if p.Type == "" {
			return fmt.Errorf("plugin %d: missing 'type'", i)
		}
	}
	return nil
}
