package etcdapi

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
)

// status is what a member says of itself (maintenance Status). etcd's
// JSON gateway writes 64-bit numbers as strings.
type status struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Version   string   `json:"version"`
	Leader    string   `json:"leader"`
	RaftIndex number   `json:"raftIndex"`
	DBSize    number   `json:"dbSize"`
	Errors    []string `json:"errors"`
}

// alarm is one member's raised alarm (NOSPACE, CORRUPT).
type alarm struct {
	MemberID string `json:"memberID"`
	Alarm    any    `json:"alarm"` // the enum's name, or its number
}

// answer is a member's status, or why it gave none.
type answer struct {
	endpoint string
	status   status
	err      error
}

// Health checks every member of etcd is healthy (etcd.health): the
// members are listed through any endpoint given, then each answers for
// itself (maintenance Status) at an endpoint given or at its own client
// URLs. It refuses, not retried, when a member does not answer, reports
// an error or an alarm, when there is no leader (or the members disagree
// on it), or when etcd has not the members expected.
func (a *Activities) Health(ctx context.Context, in etcd.HealthInput) (etcd.HealthResult, error) {
	wait := time.Duration(0)
	if in.Wait != "" {
		d, err := time.ParseDuration(in.Wait)
		if err != nil || d < 0 {
			return etcd.HealthResult{}, invalid(fmt.Sprintf("wait %q is not a duration", in.Wait))
		}
		wait = d
	}
	deadline := time.Now().Add(wait)
	for {
		res, err := a.health(ctx, in)
		if err == nil || time.Now().After(deadline) || !retryableUnhealthy(err) {
			return res, err
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, err.Error())
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// retryableUnhealthy: etcd may become healthy by waiting (not an input
// error).
func retryableUnhealthy(err error) bool {
	return errtype.Is(err, errtype.EtcdUnhealthy, errtype.EtcdUnavailable)
}

func (a *Activities) health(ctx context.Context, in etcd.HealthInput) (etcd.HealthResult, error) {
	if err := checkEndpoints(in.Endpoints); err != nil {
		return etcd.HealthResult{}, err
	}
	if in.ExpectMembers < 0 {
		return etcd.HealthResult{}, invalid("expectMembers must not be negative")
	}
	if (in.Member == "") != (in.Version == "") {
		return etcd.HealthResult{}, invalid("member and version go together: the member that must run the release")
	}
	cl, err := a.client(ctx, etcd.RemoveMemberInput{Vault: in.Vault, Endpoints: in.Endpoints, CACert: in.CACert, Issuer: in.Issuer})
	if err != nil {
		return etcd.HealthResult{}, err
	}
	var members []member
	var from string
	var lastErr error
	for _, e := range in.Endpoints {
		var out struct {
			Members []member `json:"members"`
		}
		// Not linearizable: a cluster without a leader still lists its
		// members, and is then refused for that.
		if lastErr = cl.call(ctx, e, "/v3/cluster/member/list", map[string]any{}, &out); lastErr == nil {
			members, from = out.Members, e
			break
		}
	}
	if members == nil {
		return etcd.HealthResult{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("no etcd member answered (%s): %v", strings.Join(in.Endpoints, ", "), lastErr), errtype.EtcdUnavailable, lastErr)
	}
	var alarms struct {
		Alarms []alarm `json:"alarms"`
	}
	var problems []string
	if err := cl.call(ctx, from, "/v3/maintenance/alarm", map[string]any{}, &alarms); err != nil {
		problems = append(problems, fmt.Sprintf("list the alarms through %s: %v", from, err))
	}
	res, judged := judge(members, statuses(ctx, cl, in.Endpoints, members), alarms.Alarms, in.ExpectMembers)
	problems = append(problems, judged...)
	if p := runsVersion(res, in.Member, in.Version); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return res, temporal.NewNonRetryableApplicationError("etcd is not healthy: "+strings.Join(problems, "; "), errtype.EtcdUnhealthy, nil)
	}
	return res, nil
}

// statuses asks every endpoint given, then each member none of them
// answered for at its own client URLs (which may be names the worker
// cannot resolve: the endpoints given come first). The answers are by
// member id.
func statuses(ctx context.Context, cl *client, endpoints []string, members []member) map[string]answer {
	out := map[string]answer{}
	for _, e := range endpoints {
		var st status
		if err := cl.call(ctx, e, "/v3/maintenance/status", map[string]any{}, &st); err == nil {
			if _, seen := out[st.Header.MemberID]; !seen {
				out[st.Header.MemberID] = answer{endpoint: e, status: st}
			}
		}
	}
	for _, m := range members {
		if _, ok := out[m.ID]; ok {
			continue
		}
		var last error
		for _, u := range m.ClientURLs {
			var st status
			err := cl.call(ctx, u, "/v3/maintenance/status", map[string]any{}, &st)
			if err == nil && st.Header.MemberID != m.ID {
				err = fmt.Errorf("%s answered as member %s", u, hexID(st.Header.MemberID))
			}
			if err == nil {
				out[m.ID] = answer{endpoint: u, status: st}
				last = nil
				break
			}
			last = err
		}
		if last != nil {
			out[m.ID] = answer{err: last}
		}
	}
	return out
}

// judge is the verdict on what the members said: the result, and every
// reason etcd is not healthy (none when it is).
func judge(members []member, answers map[string]answer, alarms []alarm, expect int) (etcd.HealthResult, []string) {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	names := map[string]string{}
	for _, m := range members {
		names[m.ID] = cmp.Or(m.Name, "member "+hexID(m.ID))
	}
	var res etcd.HealthResult
	var problems []string
	leaders := map[string][]string{} // leader id -> the members that say so
	for _, m := range members {
		ans, ok := answers[m.ID]
		switch {
		case m.Name == "" && len(m.ClientURLs) == 0:
			problems = append(problems, fmt.Sprintf("member %s has not started (peer URLs %s)", hexID(m.ID), strings.Join(m.PeerURLs, ", ")))
			continue
		case !ok || ans.err != nil:
			why := "no endpoint given answers for it and it has no client URL"
			if ok {
				why = ans.err.Error()
			}
			problems = append(problems, fmt.Sprintf("%s does not answer: %s", names[m.ID], why))
			continue
		}
		st := ans.status
		for _, e := range st.Errors {
			problems = append(problems, fmt.Sprintf("%s reports %s", names[m.ID], e))
		}
		if st.Leader != "" && st.Leader != "0" {
			leaders[st.Leader] = append(leaders[st.Leader], names[m.ID])
		}
		res.Members = append(res.Members, etcd.MemberHealth{Name: m.Name, ID: hexID(m.ID), Endpoint: ans.endpoint,
			Leader: st.Leader == m.ID, RaftIndex: int64(st.RaftIndex), DBSize: int64(st.DBSize), Version: st.Version})
	}
	for _, al := range alarms {
		who := names[al.MemberID]
		if who == "" {
			who = "member " + hexID(al.MemberID)
		}
		problems = append(problems, fmt.Sprintf("%s has the alarm %v raised", who, al.Alarm))
	}
	switch len(leaders) {
	case 0:
		if len(res.Members) > 0 {
			problems = append(problems, "no member knows a leader")
		}
	case 1:
		for id := range leaders {
			if res.Leader = names[id]; res.Leader == "" {
				problems = append(problems, fmt.Sprintf("the leader %s is not a member", hexID(id)))
			}
		}
	default:
		var says []string
		for id, by := range leaders {
			says = append(says, fmt.Sprintf("%s say %s", strings.Join(by, ", "), cmp.Or(names[id], hexID(id))))
		}
		slices.Sort(says)
		problems = append(problems, "the members disagree on the leader: "+strings.Join(says, "; "))
	}
	if expect > 0 && len(members) != expect {
		var all []string
		for _, m := range members {
			all = append(all, names[m.ID])
		}
		problems = append(problems, fmt.Sprintf("etcd has %d members (%s), not %d", len(members), strings.Join(all, ", "), expect))
	}
	return res, problems
}

// checkEndpoints refuses anything but https://HOST:PORT.
func checkEndpoints(endpoints []string) error {
	if len(endpoints) == 0 {
		return invalid("endpoints are required")
	}
	for _, e := range endpoints {
		if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" {
			return invalid(fmt.Sprintf("endpoint %q is not https://HOST:PORT", e))
		}
	}
	return nil
}

// hexID is a member id as etcdctl shows it.
func hexID(id string) string {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return id
	}
	return strconv.FormatUint(n, 16)
}

// number is a 64-bit number etcd's gateway writes as a string (or, from
// other encoders, as a number).
type number uint64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	*n = number(v)
	return nil
}

// runsVersion says why member does not run version ("" when it does, or
// when none is asked for).
func runsVersion(res etcd.HealthResult, member, version string) string {
	if member == "" {
		return ""
	}
	want := strings.TrimPrefix(version, "v")
	for _, m := range res.Members {
		if m.Name == member {
			if m.Version == want {
				return ""
			}
			return fmt.Sprintf("member %s runs %s, not %s", member, m.Version, want)
		}
	}
	return fmt.Sprintf("member %s did not answer as one of etcd's healthy members", member)
}
