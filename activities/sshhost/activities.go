package sshhost

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/activities/sshpool"
)

// Activities are the host actions. They share the worker's SSH pool.
type Activities struct {
	Pool *sshpool.Pool
	// HeartbeatInterval is how often long actions heartbeat (default 5s).
	HeartbeatInterval time.Duration
	// BackupDir is where host.write-file keeps previous contents on the
	// host (default /var/lib/kedge/backup).
	BackupDir string
	// RunDir is where host actions keep what lives until the host's
	// next boot, such as the record of a restart done (default
	// /run/kedge).
	RunDir string
	// KubeletDir is the kubelet's root directory on the hosts (default
	// /var/lib/kubelet), where it keeps its pods' volumes.
	KubeletDir string
}

// DefaultRunDir is RunDir's default: on tmpfs, cleared at boot.
const DefaultRunDir = "/run/kedge"

func (a *Activities) runDir() string {
	if a.RunDir != "" {
		return a.RunDir
	}
	return DefaultRunDir
}

func (a *Activities) kubeletDir() string {
	if a.KubeletDir != "" {
		return a.KubeletDir
	}
	return "/var/lib/kubelet"
}

func (a *Activities) backupDir() string {
	if a.BackupDir != "" {
		return a.BackupDir
	}
	return DefaultBackupDir
}

// heartbeat records progress every interval until the returned stop is
// called. Outside an activity (benchmarks, unit tests) it does nothing.
func (a *Activities) heartbeat(ctx context.Context, details func() any) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := a.HeartbeatInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details())
			}
		}
	}()
	return func() { close(done) }
}
