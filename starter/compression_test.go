package starter

import (
	"testing"

	"go.temporal.io/sdk/client"
)

// gzip only across a network: on this machine it costs CPU at both ends
// and sealed payloads do not shrink.
func TestCompressionOnlyAcrossANetwork(t *testing.T) {
	for addr, gzip := range map[string]bool{
		"127.0.0.1:7233":        false,
		"127.0.51.9:7233":       false,
		"localhost:7233":        false,
		"[::1]:7233":            false,
		"temporal.example:7233": true,
		"10.0.0.5:7233":         true,
		"[2001:db8::1]:7233":    true,
	} {
		_, isGzip := compressionFor(addr).(*client.GrpcCompressionGzip)
		if isGzip != gzip {
			t.Errorf("%s: gzip %v, want %v", addr, isGzip, gzip)
		}
	}
}
