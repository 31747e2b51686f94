package devserver

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/server/common/config"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"
)

// dbFile is the SQLite file inside Config.DataDir.
const dbFile = "temporal.db"

// retention of closed runs in a namespace this package creates.
const retention = 3 * 24 * time.Hour

// sqlConfig describes the SQLite database: a file in dataDir, or a private
// in-memory database when dataDir is "".
//
// The plugin passes attributes it does not know as PRAGMAs. WAL lets
// readers run beside the writer, synchronous=normal skips an fsync per
// commit (a crash may lose the last commits, never corrupt the file), and
// busy_timeout makes a connection wait for a lock instead of failing with
// "database is locked". The plugin shares one pool between all services of
// the process.
func sqlConfig(dataDir string) *config.SQL {
	if dataDir == "" {
		// Shared cache keeps the database alive and common to the pool;
		// one connection avoids shared-cache table locks.
		return &config.SQL{
			PluginName:        sqliteplugin.PluginName,
			DatabaseName:      "kedge-dev-" + newUUID(),
			ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
			MaxConns:          1,
			MaxIdleConns:      1,
		}
	}
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: filepath.Join(dataDir, dbFile),
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
		MaxConns:     sqliteMaxConns,
		MaxIdleConns: sqliteMaxConns,
	}
}

// sqliteMaxConns is the size of the file database's connection pool. One:
// with several, two connections that race to write make SQLite report
// SQLITE_BUSY_SNAPSHOT (517), which no busy timeout cures.
const sqliteMaxConns = 1

// prepareDB creates the schema of a new database file and the namespace
// when it is missing. An in-memory database gets its schema from the
// plugin when the first connection opens it.
func prepareDB(cfg *config.SQL, dataDir, namespace string) error {
	if dataDir != "" {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		_, err := os.Stat(cfg.DatabaseName)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := sqliteschema.SetupSchema(cfg); err != nil {
				// Leave no half-made file behind: the next start would
				// take it for a complete one.
				removeDBFiles(cfg.DatabaseName)
				return fmt.Errorf("create the Temporal schema in %s: %w", cfg.DatabaseName, err)
			}
		case err != nil:
			return fmt.Errorf("data dir: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, nil)
	if err != nil {
		return err
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	// A no-op when the namespace exists.
	if err := sqliteschema.CreateNamespaces(cfg, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}

func removeDBFiles(name string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(name + suffix)
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
