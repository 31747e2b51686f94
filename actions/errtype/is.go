package errtype

import (
	"errors"
	"slices"

	"go.temporal.io/sdk/temporal"
)

// Of is the type of the Temporal application error in err's chain (the
// first one errors.As finds), "" when there is none.
func Of(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// Is reports whether err is a Temporal application error of one of the
// types: what a test or a classifier asks instead of comparing Type()
// itself.
func Is(err error, types ...string) bool {
	t := Of(err)
	return t != "" && slices.Contains(types, t)
}
