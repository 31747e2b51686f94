package integration

import (
	"encoding/json"
	"testing"
	"time"
)

func TestScheduleCreatesThenUpdates(t *testing.T) {
	mainLane.join(t)
	for i, every := range []string{"24h", "12h"} {
		out, errOut, code := kedge(t, "schedule", "../examples/hello.yaml", "--inventory", world.inventory,
			"--every", every, "--paused", "--id", "hello/lab-schedule", "--output", "json")
		var res struct{ ScheduleID, Every, Result string }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("kedge schedule --every %s: exit %d: %s %s", every, code, out, errOut)
		}
		if want := []string{"created", "updated"}[i]; res.Result != want || res.ScheduleID != "hello/lab-schedule" {
			t.Errorf("schedule --every %s: %+v, want %s", every, res, want)
		}
	}
	h := world.client.ScheduleClient().GetHandle(t.Context(), "hello/lab-schedule")
	t.Cleanup(func() { _ = h.Delete(t.Context()) })
	d, err := h.Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if iv := d.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != 12*time.Hour {
		t.Errorf("intervals = %+v, want every 12h", iv)
	}
	if !d.Schedule.State.Paused {
		t.Error("the schedule is not paused")
	}
	if _, errOut, code := kedge(t, "schedule", "../examples/hello.yaml", "--inventory", world.inventory, "--every", "10s"); code != 2 {
		t.Errorf("--every 10s: exit %d %s", code, errOut)
	}
}
