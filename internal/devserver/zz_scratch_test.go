package devserver

import (
	"context"
	"os"
	"testing"
	"time"
)

func BenchmarkScratch(b *testing.B) {
	const n = 100
	dir := b.TempDir()
	if os.Getenv("MEM") != "" {
		dir = ""
	}
	s, err := Start(context.Background(), Config{DataDir: dir, FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	c := startWorker(b, s)
	runGreet(b, c, "", 1)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		runGreet(b, c, "", n)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*n), "ms/activity")
}
