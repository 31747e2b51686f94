//go:build tools

// Package prometheus pins the Prometheus server the test world runs.
package prometheus

import _ "github.com/prometheus/prometheus/cmd/prometheus"
