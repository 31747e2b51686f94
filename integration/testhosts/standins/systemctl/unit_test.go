package main

import (
	"reflect"
	"testing"
)

func TestUnitMerging(t *testing.T) {
	cases := []struct {
		name  string
		texts []string
		start []string
		env   []string
	}{
		{"drop-in resets ExecStart", []string{"[Service]\nExecStart=/a\n", "[Service]\nExecStart=\nExecStart=/b x\n"}, []string{"/b x"}, nil},
		{"environment accumulates, a later value replaces", []string{"[Service]\nEnvironment=A=1 B=2 C=3\n", "[Service]\nEnvironment=\"B=two words\"\n"}, nil, []string{"A=1", "B=two words", "C=3"}},
		{"other sections ignored", []string{"[Unit]\nExecStart=/no\n[Service]\nExecStart=/yes\n"}, []string{"/yes"}, nil},
	}
	for _, c := range cases {
		u := &unit{}
		for _, text := range c.texts {
			u.apply(text)
		}
		if !reflect.DeepEqual(u.ExecStart, c.start) || !reflect.DeepEqual(u.Environment, c.env) {
			t.Errorf("%s: start %q env %q", c.name, u.ExecStart, u.Environment)
		}
	}
}

func TestCommandExpansion(t *testing.T) {
	env := []string{"KUBELET_IMAGE=quay.io/poseidon/kubelet:v1.35.4", "FLAGS=--a --b"}
	argv, ignore := command(`-/usr/bin/docker run ${KUBELET_IMAGE} $FLAGS "quoted arg"`, env)
	want := []string{"/usr/bin/docker", "run", "quay.io/poseidon/kubelet:v1.35.4", "--a", "--b", "quoted arg"}
	if !ignore || !reflect.DeepEqual(argv, want) {
		t.Errorf("argv %q ignore %v", argv, ignore)
	}
}
