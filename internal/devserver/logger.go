package devserver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLog hands the Temporal server's warnings and errors to a
// slog.Logger and drops everything below warn. Once the server is shutting
// down it drops everything: the services then complain about each other
// going away, which is expected and of no use to a developer.
type serverLog struct {
	out   *slog.Logger
	muted *atomic.Bool
	// fatal is where a fatal error is written when out discards: the
	// server exits the process on one (a port it cannot bind), which
	// must never happen without a word.
	fatal io.Writer
}

var (
	_ log.Logger     = serverLog{}
	_ log.WithLogger = serverLog{}
)

func newServerLog(out *slog.Logger) serverLog {
	l := serverLog{out: out, muted: new(atomic.Bool)}
	if out == nil {
		l.out = slog.New(slog.NewTextHandler(io.Discard, nil))
		l.fatal = os.Stderr
	}
	return l
}

func slogArgs(tags []tag.Tag) []any {
	args := make([]any, 0, len(tags))
	for _, t := range tags {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	return args
}

func (l serverLog) emit(level slog.Level, msg string, tags []tag.Tag) {
	if l.muted.Load() {
		return
	}
	l.out.Log(context.Background(), level, msg, slogArgs(tags)...)
}

// mute drops all further output of this logger and of those derived from it.
func (l serverLog) mute() { l.muted.Store(true) }

func (l serverLog) With(tags ...tag.Tag) log.Logger {
	return serverLog{out: l.out.With(slogArgs(tags)...), muted: l.muted}
}

func (l serverLog) Debug(string, ...tag.Tag)           {}
func (l serverLog) Info(string, ...tag.Tag)            {}
func (l serverLog) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l serverLog) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l serverLog) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

func (l serverLog) Panic(msg string, tags ...tag.Tag) {
	l.out.Error(msg, slogArgs(tags)...)
	panic(msg)
}

func (l serverLog) Fatal(msg string, tags ...tag.Tag) {
	l.out.Error(msg, slogArgs(tags)...)
	if l.fatal != nil {
		slog.New(slog.NewTextHandler(l.fatal, nil)).Error("the embedded Temporal server exits: "+msg, slogArgs(tags)...)
	}
	os.Exit(1)
}

// sdkLog silences the SDK clients this package opens for its own checks.
type sdkLog struct{}

func (sdkLog) Debug(string, ...any) {}
func (sdkLog) Info(string, ...any)  {}
func (sdkLog) Warn(string, ...any)  {}
func (sdkLog) Error(string, ...any) {}
