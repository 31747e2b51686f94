package starter

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTransientErrorsAreTheOnesWaitedOut(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewUnavailable("connection refused"), true},
		{fmt.Errorf("poll: %w", serviceerror.NewUnavailable("closing")), true},
		{status.Error(codes.Unavailable, "connection error"), true},
		{status.Error(codes.DeadlineExceeded, "deadline"), true},
		{context.DeadlineExceeded, true},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: tls: bad certificate\""), false},
		{status.Error(codes.Unavailable, "x509: certificate signed by unknown authority"), false},
		{context.Canceled, false},
		{serviceerror.NewNotFound("workflow not found"), false},
		{serviceerror.NewPermissionDenied("no", ""), false},
		{errors.New("workflow execution error: activity failed"), false},
		{nil, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
