// Package srcroot finds the root of Kedge's source tree, for the test
// world's programs that build or read files of the tree (the stand-ins,
// the pause image, the tool scripts). Builds are made with -trimpath (the
// Makefile's GOFLAGS: a fresh clone reuses Go's build cache), so a
// source file's own path is not where it lies on disk.
package srcroot
