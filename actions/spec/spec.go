// Package spec holds what an action's declaration says of it beyond its
// input and result types: its row of the action table (name, doc,
// timeouts, the one-of inputs, the summary template). Each action's
// declaration file under actions/AREA registers its row in an init
// function, beside its name and types, so an action is declared in one
// file; package actions builds the table from the rows.
//
// It is pure data and a leaf: it imports nothing of Kedge's.
package spec

import (
	"slices"
	"time"
)

// Row is one action's row of the table as its declaration writes it.
type Row struct {
	Name, Doc string
	// In and Out are zero values of the action's input and result types.
	In, Out   any
	Timeout   time.Duration
	Heartbeat time.Duration
	// OneOf names inputs of which exactly one must be given.
	OneOf   []string
	Summary string
}

var rows []Row

// Register adds an action's row to the table. Declaration files call it
// from init; a name registered twice is a programming error.
func Register(r Row) {
	if slices.ContainsFunc(rows, func(o Row) bool { return o.Name == r.Name }) {
		panic("spec: action " + r.Name + " registered twice")
	}
	rows = append(rows, r)
}

// Rows returns every registered row, in registration order.
func Rows() []Row { return slices.Clone(rows) }
