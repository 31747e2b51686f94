package getopt

import (
	"reflect"
	"testing"
)

var opts = []Option{
	{ID: "quiet", Short: 'q', Long: []string{"quiet"}},
	{ID: "load", Short: 'p', Long: []string{"load"}, Arg: Optional},
	{ID: "wait", Short: 'w', Long: []string{"wait"}, Arg: Required},
	{ID: "dry-run", Short: 'n', Long: []string{"dry-run", "show"}},
	{ID: "show-depends", Long: []string{"show-depends"}},
	{ID: "system", Long: []string{"system"}},
}

func TestParse(t *testing.T) {
	cases := []struct {
		args     []string
		items    []Item
		operands []string
	}{
		{[]string{"-q", "-p", "a.conf", "b.conf"}, []Item{{ID: "quiet", Name: "-q"}, {ID: "load", Name: "-p"}}, []string{"a.conf", "b.conf"}},
		{[]string{"-qpa.conf"}, []Item{{ID: "quiet", Name: "-q"}, {ID: "load", Name: "-p", Value: "a.conf", HasArg: true}}, nil},
		{[]string{"x", "--load=a.conf", "--load", "b"}, []Item{{ID: "load", Name: "--load", Value: "a.conf", HasArg: true}, {ID: "load", Name: "--load"}}, []string{"x", "b"}},
		{[]string{"-w5", "-w", "6", "--wait", "7", "--wait=8"}, []Item{{ID: "wait", Name: "-w", Value: "5", HasArg: true}, {ID: "wait", Name: "-w", Value: "6", HasArg: true}, {ID: "wait", Name: "--wait", Value: "7", HasArg: true}, {ID: "wait", Name: "--wait", Value: "8", HasArg: true}}, nil},
		{[]string{"--qui", "--sys", "--dry"}, []Item{{ID: "quiet", Name: "--quiet"}, {ID: "system", Name: "--system"}, {ID: "dry-run", Name: "--dry-run"}}, nil},
		{[]string{"--show"}, []Item{{ID: "dry-run", Name: "--show"}}, nil},
		{[]string{"--", "-q", "-"}, nil, []string{"-q", "-"}},
		{[]string{"-", "-q"}, []Item{{ID: "quiet", Name: "-q"}}, []string{"-"}},
		{[]string{"--bogus=1"}, []Item{{Err: "unrecognized option '--bogus=1'"}}, nil},
		{[]string{"-qZ"}, []Item{{ID: "quiet", Name: "-q"}, {Err: "invalid option -- 'Z'"}}, nil},
		{[]string{"-w"}, []Item{{Err: "option requires an argument -- 'w'"}}, nil},
		{[]string{"--wait"}, []Item{{Err: "option '--wait' requires an argument"}}, nil},
		{[]string{"--quiet=yes"}, []Item{{Err: "option '--quiet' doesn't allow an argument"}}, nil},
		{[]string{"--sho"}, []Item{{Err: "option '--sho' is ambiguous; possibilities: '--show' '--show-depends'"}}, nil},
	}
	for _, c := range cases {
		items, operands := Parse(c.args, opts)
		if !reflect.DeepEqual(items, c.items) || !reflect.DeepEqual(operands, c.operands) {
			t.Errorf("%q: %+v %q, want %+v %q", c.args, items, operands, c.items, c.operands)
		}
	}
}
