package workflows

import "testing"

// An action call's activity ID gives back its step and host, whatever
// the host's name holds; IDs Kedge did not make read as none.
func TestActivityIDNamesItsStepAndHost(t *testing.T) {
	for _, tc := range []struct{ step, host string }{{"swap", "worker-1"}, {"check", ""}, {"drain", "n1.example.com"}} {
		step, host, ok := ParseActivityID(ActivityID(tc.step, tc.host, 12))
		if !ok || step != tc.step || host != tc.host {
			t.Errorf("%q on %q: read %q, %q, %v", tc.step, tc.host, step, host, ok)
		}
	}
	for _, id := range []string{"12", "", "swap", "swap/w1", "/w1#3"} {
		if _, _, ok := ParseActivityID(id); ok {
			t.Errorf("%q read as a Kedge action call", id)
		}
	}
}
