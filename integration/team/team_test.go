package team

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/workflows"
)

// The install serves what the compose file promises: the Web UI pointed
// at the codec server, which answers the UI's origin; the webhook.
func TestTeamInstallServes(t *testing.T) {
	logsOnFailure(t)
	resp, err := http.Get(world.team.UIURL() + "/api/v1/settings")
	if err != nil {
		t.Fatalf("the Web UI: %v", err)
	}
	var settings struct {
		Codec struct{ Endpoint string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&settings)
	resp.Body.Close()
	codecURL := world.team.Var("KEDGE_CODEC_URL")
	if resp.StatusCode != http.StatusOK || settings.Codec.Endpoint != codecURL {
		t.Errorf("Web UI settings: %d, codec endpoint %q, want %q", resp.StatusCode, settings.Codec.Endpoint, codecURL)
	}
	req, _ := http.NewRequest(http.MethodOptions, codecURL+"/decode", nil)
	req.Header.Set("Origin", world.team.UIURL())
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("codec server: %v", err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != world.team.UIURL() {
		t.Errorf("codec server preflight from the UI's origin: %d %v", resp.StatusCode, resp.Header)
	}
	for _, p := range world.team.Procs("kedge-webhook") {
		if err := p.WaitListening(t.Context(), "8235", 30*time.Second); err != nil {
			t.Errorf("webhook: %v", err)
		}
	}
	if out, errOut, code := kedge("setup", "--check"); code != 0 {
		t.Errorf("kedge setup --check: exit %d: %s %s", code, out, errOut)
	}
}

// A rolling kubelet swap on two workers of one queue; one worker is
// killed -9 once the first node runs the new kubelet, and the other
// finishes the rollout. Checked from the hosts and the API server.
func TestTeamWorkerKilledMidRollout(t *testing.T) {
	logsOnFailure(t)
	const image = "quay.io/poseidon/kubelet:v1.35.20"
	marks := kubeletMarks()
	since := time.Now().UTC()
	id := startRollout(t, image, 4)
	eventually(t, 3*time.Minute, "a first node on the new kubelet", func() bool { return swapped(marks, "v1.35.20") > 0 })
	victim := world.team.Procs("kedge-worker")[0]
	victim.Kill()
	done := swapped(marks, "v1.35.20")
	if done == nodes {
		t.Fatal("every node was swapped before the worker was killed: nothing to take over")
	}
	t.Logf("worker %s killed with %d of %d nodes on the new kubelet", victim.IP, done, nodes)
	err := waitClosed(t, id, 5*time.Minute)
	if victim.Running() {
		t.Error("the killed worker is running again: the other did not prove anything")
	}
	if rerr := victim.Restart(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("the rollout did not complete on the remaining worker: %v", err)
	}
	for _, v := range swapViolations(t, image, since, marks, nil) {
		t.Error(v)
	}
}

// Temporal (on PostgreSQL) killed -9 mid-rollout and started again: the
// rollout completes, and `kedge watch`, following it all along, rides out
// the outage and exits 0.
func TestTeamRidesOutATemporalRestart(t *testing.T) {
	logsOnFailure(t)
	const image = "quay.io/poseidon/kubelet:v1.35.21"
	marks := kubeletMarks()
	since := time.Now().UTC()
	id := startRollout(t, image, 4)
	type result struct {
		out, errOut string
		code        int
	}
	watched := make(chan result, 1)
	go func() {
		out, errOut, code := kedge("watch", id, "--output", "json")
		watched <- result{out, errOut, code}
	}()
	eventually(t, 3*time.Minute, "a first node on the new kubelet", func() bool { return swapped(marks, "v1.35.21") > 0 })
	srv := world.team.Procs("temporal")[0]
	srv.Kill()
	killed := time.Now()
	time.Sleep(3 * time.Second) // away for a while, as a crashed server is
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitListening(t.Context(), "7233", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("Temporal killed -9; listening again %s later (3 s of it away)", time.Since(killed).Round(time.Millisecond))
	if err := waitClosed(t, id, 5*time.Minute); err != nil {
		t.Fatalf("the rollout did not complete after Temporal's restart: %v", err)
	}
	t.Logf("rollout done %s after the kill", time.Since(killed).Round(time.Millisecond))
	select {
	case r := <-watched:
		var p workflows.Progress
		if err := json.Unmarshal([]byte(r.out), &p); r.code != 0 || err != nil || p.State != workflows.StateSucceeded {
			t.Errorf("kedge watch across the restart: exit %d (%v)\nstdout: %s\nstderr: %s", r.code, err, r.out, r.errOut)
		}
		t.Logf("kedge watch said: %s", strings.TrimSpace(r.errOut))
	case <-time.After(time.Minute):
		t.Error("kedge watch did not end a minute after the rollout")
	}
	for _, v := range swapViolations(t, image, since, marks, nil) {
		t.Error(v)
	}
}
