package host

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
}

// Registry is what Register needs of a Temporal worker.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers every host action under its action name.
func (a *Activities) Register(r Registry) {
	r.RegisterActivityWithOptions(a.Preflight, activity.RegisterOptions{Name: PreflightAction})
	r.RegisterActivityWithOptions(a.Layout, activity.RegisterOptions{Name: LayoutAction})
	r.RegisterActivityWithOptions(a.PullImage, activity.RegisterOptions{Name: PullImageAction})
	r.RegisterActivityWithOptions(a.Run, activity.RegisterOptions{Name: RunAction})
	r.RegisterActivityWithOptions(a.WriteFile, activity.RegisterOptions{Name: WriteFileAction})
	r.RegisterActivityWithOptions(a.RestoreFile, activity.RegisterOptions{Name: RestoreFileAction})
	r.RegisterActivityWithOptions(a.ReadFile, activity.RegisterOptions{Name: ReadFileAction})
	r.RegisterActivityWithOptions(a.Systemd, activity.RegisterOptions{Name: SystemdAction})
	r.RegisterActivityWithOptions(a.WriteDropIn, activity.RegisterOptions{Name: WriteDropInAction})
	r.RegisterActivityWithOptions(a.CertInfo, activity.RegisterOptions{Name: CertInfoAction})
	r.RegisterActivityWithOptions(a.InstallBundle, activity.RegisterOptions{Name: InstallBundleAction})
	r.RegisterActivityWithOptions(a.RestoreBundle, activity.RegisterOptions{Name: RestoreBundleAction})
	r.RegisterActivityWithOptions(a.RestartStaticPod, activity.RegisterOptions{Name: RestartStaticPodAction})
	r.RegisterActivityWithOptions(a.KubeletFiles, activity.RegisterOptions{Name: KubeletFilesAction})
	r.RegisterActivityWithOptions(a.CheckReadable, activity.RegisterOptions{Name: CheckReadableAction})
	r.RegisterActivityWithOptions(a.PrepareNode, activity.RegisterOptions{Name: PrepareNodeAction})
}

// DefaultRunDir is RunDir's default: on tmpfs, cleared at boot.
const DefaultRunDir = "/run/kedge"

func (a *Activities) runDir() string {
	if a.RunDir != "" {
		return a.RunDir
	}
	return DefaultRunDir
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
