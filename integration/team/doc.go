// Package team holds the tests of Kedge's team install: the services of
// docker-compose.yml run as local processes (integration/teamlab) on a
// PostgreSQL-backed Temporal with mutual TLS and two workers, against a
// cluster of twenty simulated kubelet nodes on SSH test hosts and a real
// control plane; and the chaos runs (seeded faults: workers, Temporal and
// PostgreSQL killed mid-rollout), checked from the hosts and the API
// server. A package of its own so that it runs beside integration/.
package team
