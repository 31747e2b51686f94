package testreport

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"time"
)

// Calibrate times a fixed CPU-bound job spread over every CPU: the
// machine's own measure of its speed at that moment, busy or not. About
// a fifth of a second on the reference machine.
func Calibrate() time.Duration {
	n := runtime.NumCPU()
	buf := make([]byte, 1<<20)
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := sha256.Sum256(buf)
			for range calibrationRounds / n {
				h := sha256.New()
				h.Write(buf)
				h.Write(sum[:])
				h.Sum(sum[:0])
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// calibrationRounds is the job's size: MiB hashed in all.
const calibrationRounds = 512
