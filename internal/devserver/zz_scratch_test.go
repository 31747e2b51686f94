package devserver

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

func TestScratchTiming(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var lg *slog.Logger
	if os.Getenv("SCRATCH_LOG") != "" {
		lg = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for i := range 3 {
		t0 := time.Now()
		s, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0", UIAddr: "127.0.0.1:0", Logger: lg})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d start %v", i, time.Since(t0))
		t0 = time.Now()
		c := startWorker(t, s)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "devserver-test"}, "greet-workflow", "x", 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d first workflow %v", i, time.Since(t0))
		t0 = time.Now()
		err = s.Stop()
		t.Logf("%d stop %v %v", i, time.Since(t0), err)
	}
}
