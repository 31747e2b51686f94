package pglab

import (
	"net"
	"testing"
	"time"

	"kedge.dev/kedge/internal/freeport"
)

// A real PostgreSQL starts, listens with password authentication, and
// comes back after a crash with its data.
func TestPostgresStartsKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	if _, err := Bin(); err != nil {
		t.Fatal(err)
	}
	s, err := Start(t.Context(), Options{Host: "127.0.0.1", Port: freePort(t), Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.SQL(ctx, "secret", "postgres", "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the crash')"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SQL(ctx, "wrong", "postgres", "SELECT 1"); err == nil {
		t.Error("a wrong password was let in")
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s.Address(), time.Second); err == nil {
		c.Close()
		t.Fatal("still listening after kill -9")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("restart after a crash: %v\n%s", err, s.Logs())
	}
	// A commit the server reported is kept by a crash.
	if got, err := s.SQL(ctx, "secret", "postgres", "SELECT v FROM kept"); err != nil || got != "before the crash" {
		t.Errorf("after the restart: %q, %v", got, err)
	}
}

func freePort(t *testing.T) int {
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}
