package nodefiles

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// header starts every rendered file, so whoever finds it on a host knows
// where it came from and where to change it.
const header = "# Written by Kedge. Change the inputs it was rendered from, not this file.\n"

// toYAML renders an API object as YAML: its JSON encoding (the API's own
// field names, maps sorted) converted to YAML.
func toYAML(obj any) ([]byte, error) {
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("render yaml: %w", err)
	}
	return append([]byte(header), out...), nil
}

// toMap returns the JSON form of obj as a generic map, for renderers that
// must edit it before it is written.
func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	return m, nil
}
