package main

import (
	"fmt"
	"os"

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

// loadConfig reads the KubeletConfiguration at path and applies the real
// kubelet's defaults. With no file, the defaults are the kubelet's flag
// defaults, which differ in one place: anonymous requests are allowed.
func loadConfig(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	cfg := &kubeletv1beta1.KubeletConfiguration{}
	if path == "" {
		cfg.Authentication.Anonymous.Enabled = ptr.To(true)
		return withConfigDefaults(cfg), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	// Like the real kubelet, unknown fields are not an error.
	if err := yaml.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("kubelet config %s: %w", path, err)
	}
	if cfg.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() || cfg.Kind != "KubeletConfiguration" {
		return nil, fmt.Errorf("kubelet config %s: apiVersion %q kind %q, want %s KubeletConfiguration",
			path, cfg.APIVersion, cfg.Kind, kubeletv1beta1.SchemeGroupVersion)
	}
	return withConfigDefaults(cfg), nil
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
