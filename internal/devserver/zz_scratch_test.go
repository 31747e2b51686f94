package devserver

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

func TestScratchTiming(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := range 2 {
		t0 := time.Now()
		s, err := Start(ctx, Config{DataDir: dir, FrontendAddr: "127.0.0.1:0", UIAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d start %v", i, time.Since(t0))
		t0 = time.Now()
		err = s.Stop()
		t.Logf("%d stop %v %v", i, time.Since(t0), err)
	}
}
