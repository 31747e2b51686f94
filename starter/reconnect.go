package starter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"kedge.dev/kedge/runs"
)

// transient says whether err means Temporal is away for now (not
// listening, restarting, overloaded) rather than refusing the request:
// what the CLI waits out. A failed TLS handshake is not transient: the
// same certificate will fail again.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	// third-party message: grpc-go turns a failed TLS handshake into an
	// Unavailable status whose text alone names it; no type survives.
	msg := err.Error()
	if strings.Contains(msg, "handshake failed") || strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:") {
		return false
	}
	var unavailable *serviceerror.Unavailable
	if errors.As(err, &unavailable) {
		return true
	}
	var deadline *serviceerror.DeadlineExceeded
	if errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// dialRetrying dials until Temporal answers or within has passed, saying
// once on w that it waits and why; an error that is not transient ends it
// at once.
func dialRetrying(ctx context.Context, opts client.Options, within time.Duration, w io.Writer) (client.Client, error) {
	deadline := time.Now().Add(within)
	told := false
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		cl, err := client.DialContext(attempt, opts)
		cancel()
		if err == nil {
			if told {
				fmt.Fprintf(w, "kedge: Temporal at %s answers again\n", opts.HostPort)
			}
			return cl, nil
		}
		if !transient(err) || !time.Now().Add(time.Second).Before(deadline) {
			return nil, err
		}
		if !told {
			fmt.Fprintf(w, "kedge: Temporal at %s is not answering (%v); retrying for up to %s (--connect-timeout)\n", opts.HostPort, runs.RootMessage(err), within.Round(time.Second))
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// waitResult waits for a workflow's result, riding out Temporal being
// away: the long poll is re-issued once the server answers again, with a
// line on w when the connection is lost and when it is back.
func waitResult(ctx context.Context, cl client.Client, id, runID string, w io.Writer, valuePtr any) error {
	lost := false
	for {
		err := cl.GetWorkflow(ctx, id, runID).Get(ctx, valuePtr)
		if err == nil || !transient(err) || ctx.Err() != nil {
			if lost && err == nil {
				fmt.Fprintf(w, "kedge: reconnected to Temporal\n")
			}
			return err
		}
		if !lost {
			fmt.Fprintf(w, "kedge: lost Temporal while following %s (%v); reconnecting (the run goes on without us)\n", id, runs.RootMessage(err))
			lost = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
