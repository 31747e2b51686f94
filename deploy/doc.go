// Package deploy holds no code: its test checks the team install
// (docker-compose.yml, Dockerfile, deploy/compose/, deploy/temporal/)
// against the project — every kedge command and flag it runs exists in the
// CLI, every variable it sets is read by the code, every file it mounts
// exists, every port it publishes is one a service listens on, every image
// is pinned, the server is Kedge's authorizing build (cmd/kedge-temporal)
// on the official image, and every client's certificate has the role its
// program needs — because no Docker engine runs where the tests do.
//
// It must never need Docker or the network.
package deploy
