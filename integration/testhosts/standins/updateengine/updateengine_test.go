package main

import (
	"testing"
	"time"
)

func TestFlagsAreGflags(t *testing.T) {
	set, bad := parseFlags([]string{"--status", "-nocheck_for_update", "-update=true", "operand"})
	if bad != "" || !set["status"] || set["check_for_update"] || !set["update"] {
		t.Errorf("%v %q", set, bad)
	}
	if _, bad := parseFlags([]string{"-frob"}); bad != "ERROR: unknown command line flag 'frob'" {
		t.Errorf("%q", bad)
	}
	if _, bad := parseFlags([]string{"-status=maybe"}); bad != "ERROR: illegal value 'maybe' specified for bool flag 'status'" {
		t.Errorf("%q", bad)
	}
}

func TestAnUpdateGoesThroughTheRealStates(t *testing.T) {
	start := time.Unix(1715000000, 0)
	r := attemptRecord{Started: start, Version: "3815.2.5"}
	var ops []string
	for ms := 0; ms <= 2000; ms += 100 {
		op, _, _ := phase(r, start.Add(time.Duration(ms)*time.Millisecond))
		if len(ops) == 0 || ops[len(ops)-1] != op {
			ops = append(ops, op)
		}
	}
	want := []string{"UPDATE_STATUS_CHECKING_FOR_UPDATE", "UPDATE_STATUS_UPDATE_AVAILABLE", "UPDATE_STATUS_DOWNLOADING",
		"UPDATE_STATUS_VERIFYING", "UPDATE_STATUS_FINALIZING", "UPDATE_STATUS_UPDATED_NEED_REBOOT"}
	if len(ops) != len(want) {
		t.Fatalf("%v", ops)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Errorf("%v", ops)
		}
	}
	if op, _, checked := phase(attemptRecord{Started: start}, start.Add(time.Second)); op != "UPDATE_STATUS_IDLE" || checked == 0 {
		t.Errorf("nothing offered: %s %d", op, checked)
	}
}
