package runbooks

import (
	"embed"
	"io/fs"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Builtin holds the runbooks shipped with Kedge, by name (NAME.yaml).
var Builtin fs.FS = mustSub(builtinFS, "builtin")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
