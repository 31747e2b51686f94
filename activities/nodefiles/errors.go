package nodefiles

import (
	"errors"
	"fmt"
)

// FieldError is one problem with one field of a renderer's input. The field
// is named as it is spelled in JSON (clusterDNS[1], images.etcd), so an
// operator can find it in the runbook or inventory that supplied it.
//
// A renderer reports every problem it finds at once, joined with
// errors.Join; errors.As(err, new(*FieldError)) tells invalid input from
// any other failure.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// problems collects the FieldErrors of one input.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// err is nil when nothing was added.
func (p problems) err() error { return errors.Join(p...) }
