// Package deploy holds no code: its test checks the team install
// (docker-compose.yml, Dockerfile, deploy/compose/) against the project —
// every kedge command and flag it runs exists in the CLI, every variable it
// sets is read by the code, every file it mounts exists, every port it
// publishes is one a service listens on, and every image is pinned —
// because no Docker engine runs where the tests do.
//
// It must never need Docker or the network.
package deploy
