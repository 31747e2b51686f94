package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Defaults of the KubeletConfiguration fields the simulator uses, as the
// real kubelet defaults them.
const (
	defaultHealthzBindAddress = "127.0.0.1"
	defaultHealthzPort        = 10248
	defaultPort               = 10250
	defaultPodLogsDir         = "/var/log/pods"
)

// loadConfig reads the KubeletConfiguration at path, merges the drop-ins
// of dropInDir over it (--config-dir) and applies the real kubelet's
// defaults. With no file, the defaults are the kubelet's flag defaults,
// which differ in one place: anonymous requests are allowed.
func loadConfig(path, dropInDir string) (*kubeletv1beta1.KubeletConfiguration, error) {
	cfg := &kubeletv1beta1.KubeletConfiguration{}
	if path == "" {
		cfg.Authentication.Anonymous.Enabled = ptr.To(true)
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("kubelet config: %w", err)
		}
		if err := decodeConfig(data, cfg); err != nil {
			return nil, fmt.Errorf("failed to load kubelet config file, path: %s, error: %w", path, err)
		}
	}
	if dropInDir != "" {
		if err := mergeDropIns(cfg, dropInDir); err != nil {
			return nil, fmt.Errorf("failed to merge kubelet configs: %w", err)
		}
	}
	return withConfigDefaults(cfg), nil
}

// mergeDropIns merges the KubeletConfiguration drop-ins of dir over cfg
// as the real kubelet does with --config-dir: every file named *.conf,
// walked in lexical order (subdirectories too), each a whole
// KubeletConfiguration (apiVersion and kind) applied as a JSON merge patch
// (fields it sets replace, lists whole; other files are skipped). A
// missing directory, or a drop-in that does not decode, is an error: the
// kubelet does not start on a configuration it could not read whole.
func mergeDropIns(cfg *kubeletv1beta1.KubeletConfiguration, dir string) error {
	base, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(d.Name()) != ".conf" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var dropIn kubeletv1beta1.KubeletConfiguration
		if err := decodeConfig(data, &dropIn); err != nil {
			return fmt.Errorf("failed to load drop-in file %s: %w", path, err)
		}
		patch, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("drop-in file %s: %w", path, err)
		}
		if base, err = jsonpatch.MergePatch(base, patch); err != nil {
			return fmt.Errorf("drop-in file %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to walk through kubelet dropin directory %q: %w", dir, err)
	}
	merged := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(base, merged); err != nil {
		return err
	}
	*cfg = *merged
	return nil
}

// configCodecs decode KubeletConfiguration files strictly: an unknown or
// duplicate field is an error.
var configCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeletv1beta1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}()

// decodeConfig decodes a KubeletConfiguration file (YAML or JSON) into
// cfg, strictly. The real kubelet v1.35 decodes strictly too, but for
// v1beta1 it then falls back to a lenient decoding and only logs the
// strict error ("Using lenient decoding as strict decoding failed"); the
// simulator stops there, because a field the real kubelet ignores is a
// setting that silently does not apply: a rendering mistake to catch.
func decodeConfig(data []byte, cfg *kubeletv1beta1.KubeletConfiguration) error {
	obj, gvk, err := configCodecs.UniversalDeserializer().Decode(data, nil, cfg)
	if err != nil {
		return fmt.Errorf("failed to decode: %w", err)
	}
	if _, ok := obj.(*kubeletv1beta1.KubeletConfiguration); !ok || gvk.Kind != "KubeletConfiguration" {
		return fmt.Errorf("failed to decode: %v is not a KubeletConfiguration", gvk)
	}
	return nil
}

// withFlags applies the flags that override the config, as the real
// kubelet does.
func withFlags(cfg *kubeletv1beta1.KubeletConfiguration, o options) *kubeletv1beta1.KubeletConfiguration {
	if o.healthzBindAddress != "" {
		cfg.HealthzBindAddress = o.healthzBindAddress
	}
	if o.healthzPort >= 0 {
		cfg.HealthzPort = ptr.To(int32(o.healthzPort))
	}
	if o.taintsGiven {
		cfg.RegisterWithTaints = o.taints
	}
	return cfg
}

func withConfigDefaults(cfg *kubeletv1beta1.KubeletConfiguration) *kubeletv1beta1.KubeletConfiguration {
	if cfg.HealthzBindAddress == "" {
		cfg.HealthzBindAddress = defaultHealthzBindAddress
	}
	if cfg.HealthzPort == nil {
		cfg.HealthzPort = ptr.To(int32(defaultHealthzPort))
	}
	if cfg.Port == 0 {
		cfg.Port = defaultPort
	}
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = defaultPodLogsDir
	}
	if cfg.Authentication.Anonymous.Enabled == nil {
		cfg.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	return cfg
}
