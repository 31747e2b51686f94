package etcdapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/vault"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
)

// The verdict on what the members said: each reason etcd is unhealthy is
// named; a healthy etcd has none and names its leader.
func TestJudgeNamesEveryReasonEtcdIsUnhealthy(t *testing.T) {
	three := []member{
		{ID: "11", Name: "c1", ClientURLs: []string{"https://c1:2379"}},
		{ID: "12", Name: "c2", ClientURLs: []string{"https://c2:2379"}},
		{ID: "13", Name: "c3", ClientURLs: []string{"https://c3:2379"}},
	}
	up := func(leader string) map[string]answer {
		out := map[string]answer{}
		for _, m := range three {
			st := status{Leader: leader, RaftIndex: 40, DBSize: 1 << 20}
			st.Header.MemberID = m.ID
			out[m.ID] = answer{endpoint: m.ClientURLs[0], status: st}
		}
		return out
	}
	with := func(a map[string]answer, id string, f func(*answer)) map[string]answer {
		x := a[id]
		f(&x)
		a[id] = x
		return a
	}
	for _, c := range []struct {
		name    string
		members []member
		answers map[string]answer
		alarms  []alarm
		expect  int
		want    []string // substrings of the problems, in order; none: healthy
	}{
		{name: "healthy", members: three, answers: up("12"), expect: 3},
		{name: "healthy, any number", members: three, answers: up("12")},
		{name: "a member does not answer", members: three,
			answers: with(up("12"), "13", func(a *answer) { *a = answer{err: errors.New("connection refused")} }),
			want:    []string{"c3 does not answer: connection refused"}},
		{name: "no endpoint for a member", members: three,
			answers: func() map[string]answer { a := up("12"); delete(a, "11"); return a }(),
			want:    []string{"c1 does not answer"}},
		{name: "a member reports an error", members: three,
			answers: with(up("12"), "11", func(a *answer) { a.status.Errors = []string{"memberID:11 alarm:NOSPACE"} }),
			want:    []string{"c1 reports memberID:11 alarm:NOSPACE"}},
		{name: "an alarm", members: three, answers: up("12"), alarms: []alarm{{MemberID: "13", Alarm: "NOSPACE"}},
			want: []string{"c3 has the alarm NOSPACE raised"}},
		{name: "no leader", members: three, answers: up("0"), want: []string{"no member knows a leader"}},
		{name: "disagreeing on the leader", members: three,
			answers: with(up("12"), "13", func(a *answer) { a.status.Leader = "13" }),
			want:    []string{"the members disagree on the leader: c1, c2 say c2; c3 say c3"}},
		{name: "a leader that is not a member", members: three, answers: up("99"), want: []string{"the leader 63 is not a member"}},
		{name: "fewer members than expected", members: three[:2], answers: up("12"), expect: 3,
			want: []string{"etcd has 2 members (c1, c2), not 3"}},
		{name: "a member not started", members: append(three[:2:2], member{ID: "14", PeerURLs: []string{"https://c4:2380"}}), answers: up("12"),
			want: []string{"member e has not started (peer URLs https://c4:2380)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, problems := judge(c.members, c.answers, c.alarms, c.expect)
			if len(problems) != len(c.want) {
				t.Fatalf("problems %q, want %q", problems, c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %q, want it to say %q", problems[i], w)
				}
			}
			if len(c.want) == 0 && (res.Leader != "c2" || len(res.Members) != 3 || !res.Members[1].Leader || res.Members[0].Leader ||
				res.Members[0].ID != "b" || res.Members[0].RaftIndex != 40 || res.Members[0].DBSize != 1<<20) {
				t.Errorf("healthy result %+v", res)
			}
		})
	}
}

// fakeMember is one member's JSON gateway.
type fakeMember struct {
	mu         sync.Mutex
	id, leader string
	members    func() []member
	srv        *httptest.Server
}

func (f *fakeMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v3/cluster/member/list":
		_ = json.NewEncoder(w).Encode(map[string]any{"members": f.members()})
	case "/v3/maintenance/alarm":
		_, _ = w.Write([]byte(`{"header":{}}`))
	case "/v3/maintenance/status":
		f.mu.Lock()
		leader := f.leader
		f.mu.Unlock()
		// As etcd's gateway writes them: 64-bit numbers as strings.
		_, _ = w.Write([]byte(`{"header":{"member_id":"` + f.id + `"},"version":"3.6.16","leader":"` + leader + `","raftIndex":"1234","dbSize":"20480"}`))
	default:
		http.NotFound(w, r)
	}
}

type fakeIssuer struct{ cert, key string }

func (f fakeIssuer) IssueCert(context.Context, vault.IssueCertInput) (vault.IssueCertResult, error) {
	return vault.IssueCertResult{Certificate: f.cert, PrivateKey: f.key}, nil
}

func clientPair(t *testing.T) fakeIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kedge-etcd-client"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	return fakeIssuer{cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		key: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))}
}

// threeMembers are the gateways of three members, c1 to c3 (ids 11 to
// 13), each saying leader is the leader, and the CA they serve with.
func threeMembers(t *testing.T, leader string) ([]*fakeMember, string) {
	t.Helper()
	var fakes []*fakeMember
	list := func() []member {
		var out []member
		for i, f := range fakes {
			out = append(out, member{ID: f.id, Name: "c" + string(rune('1'+i)), ClientURLs: []string{f.srv.URL}})
		}
		return out
	}
	for _, id := range []string{"11", "12", "13"} {
		f := &fakeMember{id: id, leader: leader, members: list}
		f.srv = httptest.NewTLSServer(f)
		t.Cleanup(f.srv.Close)
		fakes = append(fakes, f)
	}
	return fakes, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fakes[0].srv.Certificate().Raw}))
}

// etcd.health lists the members through the endpoint given and asks the
// others at their own client URLs; it reads the gateway's numbers; a
// member that stops answering is a refusal naming it, and no member
// answering at all is retried.
func TestHealthAsksEachMemberForItself(t *testing.T) {
	fakes, ca := threeMembers(t, "12")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.HealthInput{Endpoints: []string{fakes[0].srv.URL}, CACert: ca, Issuer: "etcd", ExpectMembers: 3}
	res, err := a.Health(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Leader != "c2" || len(res.Members) != 3 || res.Members[2].Endpoint != fakes[2].srv.URL || res.Members[2].RaftIndex != 1234 ||
		res.Members[2].DBSize != 20480 || res.Members[2].ID != "d" || !res.Members[1].Leader || res.Members[2].Version != "3.6.16" {
		t.Errorf("healthy: %+v", res)
	}
	// After a member's upgrade: it must say it runs the release.
	in.Member, in.Version = "c3", "v3.6.16"
	if _, err := a.Health(context.Background(), in); err != nil {
		t.Errorf("c3 runs 3.6.16: %v", err)
	}
	in.Version = "3.7.3"
	if _, err := a.Health(context.Background(), in); !errtype.Is(err, errtype.EtcdUnhealthy) || !strings.Contains(err.Error(), "member c3 runs 3.6.16, not 3.7.3") {
		t.Errorf("c3 not on 3.7.3: %v", err)
	}
	in.Member = ""
	if _, err := a.Health(context.Background(), in); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("a version without a member: %v", err)
	}
	in.Version = ""

	fakes[2].srv.Close()
	var ae *temporal.ApplicationError
	_, err = a.Health(context.Background(), in)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdUnhealthy) || !ae.NonRetryable() || !strings.Contains(err.Error(), "c3 does not answer") {
		t.Errorf("a member down: %v", err)
	}
	in.Endpoints = []string{fakes[2].srv.URL}
	_, err = a.Health(context.Background(), in)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdUnavailable) || ae.NonRetryable() {
		t.Errorf("no member answering: %v", err)
	}
	in.Endpoints = []string{"http://" + strings.TrimPrefix(fakes[0].srv.URL, "https://")}
	if _, err = a.Health(context.Background(), in); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("an http endpoint: %v", err)
	}
}

// With wait, etcd that is not healthy yet (a member just restarted, no
// leader elected) is asked again until it is; without, refused at once.
func TestHealthWaitsForALeader(t *testing.T) {
	fakes, ca := threeMembers(t, "0")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.HealthInput{Endpoints: []string{fakes[0].srv.URL}, CACert: ca, Issuer: "etcd", ExpectMembers: 3}
	if _, err := a.Health(context.Background(), in); !errtype.Is(err, errtype.EtcdUnhealthy) {
		t.Fatalf("no leader, no wait: %v", err)
	}
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		time.Sleep(time.Second)
		for _, f := range fakes {
			f.mu.Lock()
			f.leader = "12"
			f.mu.Unlock()
		}
	}()
	in.Wait = "1m"
	res, err := a.Health(context.Background(), in)
	<-elected
	if err != nil || res.Leader != "c2" {
		t.Errorf("with wait, once a leader is elected: %+v %v", res, err)
	}
	in.Wait = "soon"
	if _, err := a.Health(context.Background(), in); !errtype.Is(err, errtype.InvalidInput) {
		t.Errorf("wait soon: %v", err)
	}
}
