package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// DefaultAPIOutage is how long a node action waits out an API server that
// does not answer before failing: long enough for a restart (a control
// plane upgrade, a certificate renewal restarting the static pods).
const DefaultAPIOutage = 2 * time.Minute

func (a *Activities) apiOutage() time.Duration {
	if a.APIOutage > 0 {
		return a.APIOutage
	}
	return DefaultAPIOutage
}

// away says whether err means the API server did not answer (refused or
// dropped connections, timeouts, 429, 503, 504), not that it answered
// no. It reads the error's types: the API's status, syscall's, net's and
// io's errors, which client-go and Kedge's drainer keep wrapped. An
// answer whose text names a failure (a 500 from a webhook that refused
// the API server's connection) is an answer. Text is read only for the
// two failures Go's HTTP transports report by text alone (httpLost).
func away(err error) bool {
	var own *drainTimedOut
	if err == nil || errors.Is(err, context.Canceled) || errors.As(err, &own) {
		return false
	}
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	var ne net.Error // i/o timeouts, TLS handshake timeouts, a client's own timeout
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return httpLost(err)
}

// httpLost says whether err is one of the two failures Go's HTTP
// transports make with errors.New and nothing else: a connection whose
// ping went unanswered, and a request cancelled while it waited for a
// connection.
func httpLost(err error) bool {
	// third-party message: golang.org/x/net/http2 (the transport client-go
	// configures) and net/http's copy of it close a connection whose ping
	// went unanswered with errors.New("http2: client connection lost"),
	// and net/http's errRequestCanceledConn is unexported: neither has a
	// type or an exported value to match.
	msg := err.Error()
	return strings.Contains(msg, "http2: client connection lost") ||
		strings.Contains(msg, "net/http: request canceled while waiting for connection")
}

type logger interface {
	Info(msg string, keyvals ...any)
	Warn(msg string, keyvals ...any)
}

// log is the activity's logger (with its workflow and activity IDs), or
// the worker's outside one.
func (a *Activities) log(ctx context.Context) logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	if a.Logger != nil {
		return a.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// whileAway calls f again while it fails because the API server does not
// answer, for up to apiOutage, heartbeating and saying so once in the
// worker's log; any other outcome is f's own.
func (a *Activities) whileAway(ctx context.Context, what string, f func() error) error {
	return a.whileAwayBeating(ctx, what, f, nil)
}

// whileAwayBeating is whileAway for an action that heartbeats its
// progress (details, when not nil): that is what it heartbeats while the
// API server is away, so a worker lost meanwhile hands it on.
func (a *Activities) whileAwayBeating(ctx context.Context, what string, f func() error, details func() any) error {
	deadline := time.Now().Add(a.apiOutage())
	told := false
	for {
		err := f()
		if !away(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if told && err == nil {
				a.log(ctx).Info("the API server answers again", "action", what)
			}
			return err
		}
		if !told {
			a.log(ctx).Warn("the API server does not answer; asking again", "action", what, "for", a.apiOutage(), "error", err)
			told = true
		}
		if details != nil {
			heartbeat(ctx, details())
		} else {
			heartbeat(ctx, map[string]any{"apiServer": "away", "error": err.Error()})
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(a.poll()):
		}
	}
}

// drainTimedOut is a drain that ran out of its own time (the input's
// timeout, from the first attempt's start): an answer, not an API server
// that is away.
type drainTimedOut struct {
	after time.Duration
	err   error
}

func (e *drainTimedOut) Error() string {
	return fmt.Sprintf("timed out after %s: %v", e.after.Round(time.Second), e.err)
}

func (e *drainTimedOut) Unwrap() error { return e.err }
