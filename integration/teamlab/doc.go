// Package teamlab runs Kedge's team install without Docker: the services
// of docker-compose.yml, read from the file itself (internal/composefile),
// as local processes, so the file and what the tests run cannot drift.
//
// Each image maps to the program it ships: postgres to Debian's
// PostgreSQL (integration/pglab), temporalio/admin-tools to the compose
// job's own script with temporal-sql-tool, temporalio/server to the
// image's entrypoint script and temporal-server, temporalio/ui to the UI
// server, and the kedge image to the kedge binary; the Temporal programs
// are built from the versions go.mod pins (scripts/temporal-tools.sh).
// The temporal service builds Kedge's server on the official image
// (deploy/temporal/Dockerfile): the image's entrypoint then finds Kedge's
// build (cmd/kedge-temporal, scripts/kedge-temporal.sh) as temporal-server,
// so the team's server authorizes calls by certificate role as the
// compose install's does.
// Every service (and every replica) gets its own loopback address, as a
// container gets its own address on the compose network: addresses
// naming a service are rewritten to its address, 0.0.0.0 to the
// service's own, and paths inside a container to what its volumes mount
// there. depends_on is honoured (started, healthy, completed
// successfully, with restart: on-failure:N retries). What differs from
// Docker: no image isolation, and every process runs as the test's user
// rather than the file's user: line.
package teamlab
