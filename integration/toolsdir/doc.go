// Package toolsdir finds the test world's prebuilt servers: the directory
// named by an environment variable, or else the one a build script of
// scripts/ prints after building them (cached per pinned version). Shared
// by integration/controlplane and integration/vaultlab.
package toolsdir
