#!/bin/sh
# Creates or upgrades Temporal's two PostgreSQL databases (temporal,
# temporal_visibility). Idempotent: runs on every `docker compose up`.
set -eu
: "${POSTGRES_SEEDS:=postgresql}" "${DB_PORT:=5432}" "${POSTGRES_USER:=temporal}"
export SQL_PASSWORD="${POSTGRES_PWD}"
# admin-tools keeps the schemas in /etc/temporal/schema; the team harness
# points at the server module's copy.
schema="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}/postgresql/v12"
tool() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }
for db in temporal temporal_visibility; do
	dir=temporal
	[ "$db" = temporal_visibility ] && dir=visibility
	tool --db "$db" create || echo "database $db exists"
	tool --db "$db" setup-schema -v 0.0
	tool --db "$db" update-schema -d "$schema/$dir/versioned"
done
echo "temporal schemas are up to date"
