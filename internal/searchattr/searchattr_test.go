package searchattr

import (
	"errors"
	"slices"
	"testing"

	"go.temporal.io/api/serviceerror"
)

func TestNames(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{Cluster, Node, Runbook, Status}) {
		t.Errorf("Names() = %v", got)
	}
}

// The server's words for a start or a list that uses an attribute the
// namespace lacks (SQL and Elasticsearch visibility).
func TestIsMissing(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewInvalidArgument("search attribute KedgeCluster is not defined"), true},
		{serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute KedgeStatus"), true},
		{serviceerror.NewInvalidArgument("invalid query: unable to convert filter expression: unable to convert left side of \"KedgeCluster = 'x'\": invalid search attribute: KedgeCluster"), true},
		{serviceerror.NewInvalidArgument("search attribute CustomerId is not defined"), false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := IsMissing(c.err); got != c.want {
			t.Errorf("IsMissing(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
