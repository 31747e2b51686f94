// Package errtext holds the test of scripts/errtext.sh, the lint that
// refuses errors told apart by their text (`make lint` runs the script;
// this package has no code of its own). The test hands the script small
// Go files, each of which it must pass or refuse.
package errtext
