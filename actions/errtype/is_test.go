package errtype

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"
)

func TestOfAndIs(t *testing.T) {
	unhealthy := temporal.NewNonRetryableApplicationError("member c3 does not answer", EtcdUnhealthy, nil)
	wrapped := fmt.Errorf("health: %w", unhealthy)
	// The first application error in the chain is the one read, as
	// errors.As reads it.
	outer := temporal.NewApplicationErrorWithCause("quorum", EtcdQuorum, unhealthy)
	untyped := temporal.NewApplicationError("no type", "")
	for _, c := range []struct {
		name  string
		err   error
		of    string
		is    []string
		isNot []string
	}{
		{"nil", nil, "", nil, []string{EtcdUnhealthy}},
		{"plain error", errors.New(EtcdUnhealthy), "", nil, []string{EtcdUnhealthy}},
		{"application error", unhealthy, EtcdUnhealthy, []string{EtcdUnhealthy}, []string{EtcdUnavailable, InvalidInput}},
		{"wrapped", wrapped, EtcdUnhealthy, []string{EtcdUnhealthy}, []string{EtcdUnavailable}},
		{"the first in the chain", outer, EtcdQuorum, []string{EtcdQuorum}, []string{EtcdUnhealthy}},
		{"no type", untyped, "", nil, []string{"", EtcdUnhealthy}}, // "" is no type, never matched
	} {
		if got := Of(c.err); got != c.of {
			t.Errorf("%s: Of = %q, want %q", c.name, got, c.of)
		}
		for _, typ := range c.is {
			if !Is(c.err, typ) {
				t.Errorf("%s: Is(%q) = false", c.name, typ)
			}
		}
		for _, typ := range c.isNot {
			if Is(c.err, typ) {
				t.Errorf("%s: Is(%q) = true", c.name, typ)
			}
		}
		if len(c.is) > 0 && !Is(c.err, slices.Concat(c.isNot, c.is[:1])...) {
			t.Errorf("%s: Is among several types = false", c.name)
		}
		if Is(c.err) {
			t.Errorf("%s: Is of no types = true", c.name)
		}
	}
}
