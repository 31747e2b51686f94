// Package toolsdir is shared by integration/controlplane and
// integration/vaultlab: both find their prebuilt binaries the same way.
package toolsdir
