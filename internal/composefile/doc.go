// Package composefile reads the part of the Compose specification Kedge's
// docker-compose.yml uses: strictly (a misspelt key is an error), with
// ${VAR:-default} interpolation and bind mounts resolved to their sources.
// The deploy tests check the file against the code with it, and the team
// harness (integration/teamlab) runs the file's services as local
// processes from it, so the two read one file the same way.
package composefile
