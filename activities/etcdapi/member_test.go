package etcdapi

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
)

// fakeCluster is the JSON gateways of etcd's members, sharing one
// membership that member/add and member/remove change. A member whose
// gateway is closed does not answer.
type fakeCluster struct {
	mu      sync.Mutex
	members []member
	srvs    map[string]*httptest.Server // by member id
	adds    int
	removes int
	next    int
	// noQuorum: a linearizable member list fails, as etcd's does when
	// its members cannot make a quorum.
	noQuorum bool
}

// newFakeCluster starts the gateways of members c1 .. cN (ids 11 ..),
// each listing its gateway as its client URL, and returns the cluster and
// the CA they serve with.
func newFakeCluster(t *testing.T, n int) (*fakeCluster, string) {
	t.Helper()
	f := &fakeCluster{srvs: map[string]*httptest.Server{}, next: 11 + n}
	var ca string
	for i := range n {
		id := strconv.Itoa(11 + i)
		srv := httptest.NewTLSServer(f.handler(id))
		t.Cleanup(srv.Close)
		f.srvs[id] = srv
		name := "c" + strconv.Itoa(i+1)
		f.members = append(f.members, member{ID: id, Name: name, PeerURLs: []string{"https://" + name + ".test:2380"}, ClientURLs: []string{srv.URL}})
		ca = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	}
	return f, ca
}

func (f *fakeCluster) handler(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var req struct {
			ID           string   `json:"ID"`
			PeerURLs     []string `json:"peerURLs"`
			Linearizable bool     `json:"linearizable"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch r.URL.Path {
		case "/v3/cluster/member/list":
			if req.Linearizable && f.noQuorum {
				http.Error(w, `{"error":"etcdserver: request timed out"}`, http.StatusServiceUnavailable)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"members": f.members})
		case "/v3/maintenance/status":
			_, _ = w.Write([]byte(`{"header":{"member_id":"` + id + `"},"leader":"11"}`))
		case "/v3/cluster/member/add":
			f.adds++
			m := member{ID: strconv.Itoa(f.next), PeerURLs: req.PeerURLs}
			f.next++
			f.members = append(f.members, m)
			_ = json.NewEncoder(w).Encode(map[string]any{"member": m, "members": f.members})
		case "/v3/cluster/member/remove":
			f.removes++
			for i, m := range f.members {
				if m.ID == req.ID {
					f.members = append(f.members[:i], f.members[i+1:]...)
					break
				}
			}
			_, _ = w.Write([]byte(`{}`))
		default:
			http.NotFound(w, r)
		}
	})
}

// down closes member id's gateway: it answers no more.
func (f *fakeCluster) down(id string) { f.srvs[id].Close() }

func (f *fakeCluster) url(id string) string { return f.srvs[id].URL }

func (f *fakeCluster) changes() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.adds, f.removes
}

func wantAppError(t *testing.T, what string, err error, typ string, says ...string) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !errtype.Is(err, typ) || !ae.NonRetryable() {
		t.Fatalf("%s: %v, want a non-retryable %s", what, err, typ)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// With lost, a member that still answers as itself is not removed,
// neither at an endpoint given nor at its own client URL; once it answers
// nowhere it is, and a second run finds it gone.
func TestRemoveLostMemberRefusedWhileItAnswers(t *testing.T) {
	f, ca := newFakeCluster(t, 3)
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.RemoveMemberInput{Member: "c2", Endpoints: []string{f.url("11"), f.url("12"), f.url("13")}, CACert: ca, Issuer: "etcd", Lost: true}
	_, err := a.RemoveMember(context.Background(), in)
	wantAppError(t, "c2 answering at an endpoint given", err, errtype.EtcdMemberNotLost, "c2 is not lost", "at "+f.url("12"), "node-remove takes a live controller out")

	// Not among the endpoints given: found at its own client URL.
	in.Endpoints = []string{f.url("11"), f.url("13")}
	_, err = a.RemoveMember(context.Background(), in)
	wantAppError(t, "c2 answering at its client URL", err, errtype.EtcdMemberNotLost, "at "+f.url("12"))
	if _, removes := f.changes(); removes != 0 {
		t.Fatalf("a live member was removed")
	}

	// Without lost, the same member is removed (node-remove).
	in.Lost, in.DryRun = false, true
	if res, err := a.RemoveMember(context.Background(), in); err != nil || res.Healthy != 2 || res.Removed || !res.Found {
		t.Fatalf("dry run without lost: %+v %v", res, err)
	}

	f.down("12")
	in.Lost, in.DryRun = true, true
	in.Endpoints = []string{f.url("11"), f.url("12"), f.url("13")}
	if res, err := a.RemoveMember(context.Background(), in); err != nil || res.Removed || res.Healthy != 2 {
		t.Fatalf("dry run, c2 lost: %+v %v", res, err)
	}
	in.DryRun = false
	res, err := a.RemoveMember(context.Background(), in)
	if err != nil || !res.Removed || strings.Join(res.Members, ",") != "c1,c3" {
		t.Fatalf("c2 lost: %+v %v", res, err)
	}
	if res, err := a.RemoveMember(context.Background(), in); err != nil || res.Removed || res.Found {
		t.Fatalf("second run: %+v %v", res, err)
	}
}

// A lost member is not removed when the others left could not keep a
// quorum: two of three down, the member asked lists the members only as
// it last knew them, and the refusal names the quorum (not an etcd that
// does not answer).
func TestRemoveLostMemberKeepsAQuorum(t *testing.T) {
	f, ca := newFakeCluster(t, 3)
	f.down("12")
	f.down("13")
	f.noQuorum = true
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.RemoveMemberInput{Member: "c2", Endpoints: []string{f.url("11"), f.url("12"), f.url("13")}, CACert: ca, Issuer: "etcd", Lost: true, DryRun: true}
	_, err := a.RemoveMember(context.Background(), in)
	wantAppError(t, "two of three down", err, errtype.EtcdQuorum, "would leave 2 members, of which 1 answer (not c3): a quorum needs 2")
}

// A member is added when the healthy ones stay a quorum of the new size,
// named in the initial cluster the new member starts with; a second add
// of the same peer URL changes nothing and gives the same; the numbers
// are explained when refused.
func TestAddMember(t *testing.T) {
	f, ca := newFakeCluster(t, 2)
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.AddMemberInput{Endpoints: []string{f.url("11"), f.url("12")}, CACert: ca, Issuer: "etcd", Name: "c4", PeerURL: "https://c4.test:2380"}
	res, err := a.AddMember(context.Background(), in)
	const want = "c1=https://c1.test:2380,c2=https://c2.test:2380,c4=https://c4.test:2380"
	if err != nil || !res.Added || res.InitialCluster != want || strings.Join(res.Members, ",") != "c1,c2,c4" || res.Healthy != 2 || res.ID != "d" {
		t.Fatalf("add c4: %+v %v", res, err)
	}
	// Not started yet: etcd lists it without a name.
	again, err := a.AddMember(context.Background(), in)
	if err != nil || again.Added || again.InitialCluster != want || again.ID != "d" {
		t.Fatalf("second add of c4: %+v %v", again, err)
	}
	if adds, _ := f.changes(); adds != 1 {
		t.Fatalf("%d adds, want 1", adds)
	}
	// Another member while c4 has not started: refused.
	_, err = a.AddMember(context.Background(), etcd.AddMemberInput{Endpoints: in.Endpoints, CACert: ca, Issuer: "etcd", Name: "c5", PeerURL: "https://c5.test:2380"})
	wantAppError(t, "c5 while c4 has not started", err, errtype.EtcdQuorum, "member d (peer URLs https://c4.test:2380) was added and has not started")
	// c4's peer URL under another name, c1's name with another URL.
	_, err = a.AddMember(context.Background(), etcd.AddMemberInput{Endpoints: in.Endpoints, CACert: ca, Issuer: "etcd", Name: "c1", PeerURL: "https://c9.test:2380"})
	wantAppError(t, "c1 again", err, errtype.InvalidInput, "already has a member c1")
	_, err = a.AddMember(context.Background(), etcd.AddMemberInput{Endpoints: in.Endpoints, CACert: ca, Issuer: "etcd", Name: "c9", PeerURL: "https://c1.test:2380"})
	wantAppError(t, "c1's peer URL", err, errtype.InvalidInput, "is etcd member c1's")
	for _, bad := range []etcd.AddMemberInput{
		{Endpoints: in.Endpoints, Name: "c5", PeerURL: "http://c5.test:2380"},
		{Endpoints: in.Endpoints, Name: "c5", PeerURL: "https://c5.test"},
		{Endpoints: in.Endpoints, Name: "c5=x", PeerURL: "https://c5.test:2380"},
		{Endpoints: []string{"c1:2379"}, Name: "c5", PeerURL: "https://c5.test:2380"},
	} {
		bad.CACert, bad.Issuer = ca, "etcd"
		_, err := a.AddMember(context.Background(), bad)
		wantAppError(t, "input "+bad.Name+" "+bad.PeerURL, err, errtype.InvalidInput)
	}
}

// Two members, one down: a third would make a cluster of 3 whose quorum
// of 2 the one healthy member cannot make until the new one starts.
func TestAddMemberRefusedWithoutAQuorumOfTheNewSize(t *testing.T) {
	f, ca := newFakeCluster(t, 2)
	f.down("12")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	in := etcd.AddMemberInput{Endpoints: []string{f.url("11"), f.url("12")}, CACert: ca, Issuer: "etcd", Name: "c4", PeerURL: "https://c4.test:2380"}
	_, err := a.AddMember(context.Background(), in)
	wantAppError(t, "one of two down", err, errtype.EtcdQuorum,
		"adding c4 would make 3 members, of which 1 answer (not c2): a quorum of 3 needs 2, and c4 counts only once it has started")
	if adds, _ := f.changes(); adds != 0 {
		t.Fatalf("added while refused")
	}
}

// Against a real etcd of one member: adding a second is refused by
// Kedge's quorum check before etcd is asked (one healthy member is no
// quorum of two), the member list unchanged; removing it as lost is
// refused while it answers. (A real add that succeeds needs a quorum of
// the new size: TestControllerReplaceOnTyphoonCluster.)
func TestMembershipOfARealEtcd(t *testing.T) {
	e := startEtcd(t)
	a := &Activities{Vault: e.issuer, Timeout: 5 * time.Second}
	_, err := a.AddMember(context.Background(), etcd.AddMemberInput{Endpoints: []string{e.endpoint}, CACert: e.caPEM, Issuer: "etcd",
		Name: "m2", PeerURL: "https://127.0.0.1:1"})
	wantAppError(t, "a second member of one", err, errtype.EtcdQuorum, "adding m2 would make 2 members, of which 1 answer: a quorum of 2 needs 2")
	var list struct {
		Members []member `json:"members"`
	}
	if err := e.lab.Call("/v3/cluster/member/list", map[string]any{}, &list); err != nil || len(list.Members) != 1 {
		t.Fatalf("members after the refusal: %+v %v", list, err)
	}
	_, err = a.RemoveMember(context.Background(), etcd.RemoveMemberInput{Member: "m1", Endpoints: []string{e.endpoint}, CACert: e.caPEM, Issuer: "etcd", Lost: true, DryRun: true})
	wantAppError(t, "m1 lost", err, errtype.EtcdMemberNotLost, "m1 is not lost: it answers as etcd member", "at "+e.endpoint)
}
