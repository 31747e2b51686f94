package etcdapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/vault"
	"kedge.dev/kedge/internal/sealstream"
)

// Activities are the etcd actions.
type Activities struct {
	Vault Issuer
	// Timeout bounds each request to a member (default 5s).
	Timeout time.Duration
	// Keys are the codec keys etcd.snapshot seals with (nil: it refuses).
	Keys sealstream.Keys
	// Destinations are the backup destinations the worker's inventories
	// define, which etcd.snapshot stores into (nil: it refuses).
	Destinations Destinations
	// Hosts and Files reach the controllers etcd-restore restores etcd
	// on (nil: etcd.stop-control-plane, etcd.start-control-plane and
	// etcd.restore-member refuse).
	Hosts Hosts
	Files Files
}

// Issuer issues the short-lived client certificate the etcd actions
// reach the members with, from the cluster's etcd CA in Vault (the Vault
// actions' IssueCert).
type Issuer interface {
	IssueCert(ctx context.Context, in vault.IssueCertInput) (vault.IssueCertResult, error)
}

type member struct {
	ID         string   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// RemoveMember removes a member from etcd (etcd.remove-member) once the
// others can carry on: the members left must be at least one, and the
// healthy ones among them a quorum of them. A member already gone is
// success, so a re-run node-remove goes on. With lost, a member that
// still answers as itself is refused: its host is not gone.
func (a *Activities) RemoveMember(ctx context.Context, in etcd.RemoveMemberInput) (etcd.RemoveMemberResult, error) {
	if strings.TrimSpace(in.Member) == "" || len(in.Endpoints) == 0 {
		return etcd.RemoveMemberResult{}, invalid("member and endpoints are required")
	}
	if err := checkEndpoints(in.Endpoints); err != nil {
		return etcd.RemoveMemberResult{}, err
	}
	cl, err := a.client(ctx, in)
	if err != nil {
		return etcd.RemoveMemberResult{}, err
	}
	members, from, err := listMembers(ctx, cl, in.Endpoints)
	if err != nil {
		return etcd.RemoveMemberResult{}, err
	}
	var target *member
	var rest []member
	for i := range members {
		if members[i].Name == in.Member {
			target = &members[i]
		} else {
			rest = append(rest, members[i])
		}
	}
	res := etcd.RemoveMemberResult{}
	for _, m := range rest {
		res.Members = append(res.Members, m.Name)
	}
	slices.Sort(res.Members)
	if target == nil {
		return res, nil
	}
	res.Found = true
	res.URLs = append(slices.Clone(target.PeerURLs), target.ClientURLs...)
	up := answering(ctx, cl, in.Endpoints)
	if in.Lost {
		if at, ok := stillAnswers(ctx, cl, *target, in.Endpoints, up); ok {
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%s is not lost: it answers as etcd member %s at %s; node-remove takes a live controller out", in.Member, hexID(target.ID), at), errtype.EtcdMemberNotLost, nil)
		}
	}
	if len(rest) == 0 {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s is etcd's last member: removing it would end the cluster", in.Member), errtype.EtcdQuorum, nil)
	}
	var sick []string
	for _, m := range rest {
		if up[m.ID] != "" {
			res.Healthy++
		} else {
			sick = append(sick, cmp.Or(m.Name, "member "+hexID(m.ID)+" (not started)"))
		}
	}
	if quorum := len(rest)/2 + 1; res.Healthy < quorum {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"removing %s would leave %d members, of which %d answer (not %s): a quorum needs %d; bring them back first",
			in.Member, len(rest), res.Healthy, strings.Join(sick, ", "), quorum), errtype.EtcdQuorum, nil)
	}
	if in.DryRun {
		return res, nil
	}
	if err := cl.call(ctx, from, "/v3/cluster/member/remove", map[string]any{"ID": target.ID}, nil); err != nil {
		return res, temporal.NewApplicationErrorWithCause(fmt.Sprintf("remove %s (%s) through %s: %v", in.Member, target.ID, from, err), errtype.EtcdUnavailable, err)
	}
	res.Removed = true
	return res, nil
}

// listMembers lists etcd's members through the first endpoint that
// answers, and says which: linearizable (through a quorum) when any
// member can; else as a member last knew them (serializable), so that a
// cluster without a quorum is refused for that, naming the members down,
// rather than as unreachable.
func listMembers(ctx context.Context, cl *client, endpoints []string) ([]member, string, error) {
	var lastErr error
	for _, linearizable := range []bool{true, false} {
		for _, e := range endpoints {
			var out struct {
				Members []member `json:"members"`
			}
			if lastErr = cl.call(ctx, e, "/v3/cluster/member/list", map[string]any{"linearizable": linearizable}, &out); lastErr == nil {
				return out.Members, e, nil
			}
		}
	}
	return nil, "", temporal.NewApplicationErrorWithCause(fmt.Sprintf("no etcd member answered (%s): %v", strings.Join(endpoints, ", "), lastErr), errtype.EtcdUnavailable, lastErr)
}

// answering asks each endpoint which member it is: the members that
// answered, by id, each with the endpoint that answered for it. A member
// is healthy when one of the endpoints given answers as it (the members'
// own client URLs may be names the worker cannot resolve).
func answering(ctx context.Context, cl *client, endpoints []string) map[string]string {
	up := map[string]string{}
	for _, e := range endpoints {
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
		}
		if cl.call(ctx, e, "/v3/maintenance/status", map[string]any{}, &st) == nil && up[st.Header.MemberID] == "" {
			up[st.Header.MemberID] = e
		}
	}
	return up
}

// stillAnswers says where m answers as itself: at an endpoint given (up,
// from answering) or at one of its own client URLs.
func stillAnswers(ctx context.Context, cl *client, m member, endpoints []string, up map[string]string) (string, bool) {
	if e := up[m.ID]; e != "" {
		return e, true
	}
	for _, u := range m.ClientURLs {
		if slices.Contains(endpoints, u) {
			continue // asked already
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
		}
		if cl.call(ctx, u, "/v3/maintenance/status", map[string]any{}, &st) == nil && st.Header.MemberID == m.ID {
			return u, true
		}
	}
	return "", false
}

type client struct {
	http    *http.Client
	tls     *tls.Config // what http dials with; etcd.snapshot's gRPC stream too
	timeout time.Duration
}

// client makes an HTTPS client that trusts etcd's CA alone and presents a
// ten-minute client certificate from Vault (its key never leaves the
// worker).
func (a *Activities) client(ctx context.Context, in etcd.RemoveMemberInput) (*client, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(in.CACert)) {
		return nil, invalid("caCert holds no certificate")
	}
	issued, err := a.Vault.IssueCert(ctx, vault.IssueCertInput{Vault: in.Vault, CommonName: "kedge-etcd-client", Issuer: in.Issuer, TTL: "10m", Verbatim: true})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair([]byte(issued.Certificate), []byte(issued.PrivateKey))
	if err != nil {
		return nil, temporal.NewApplicationErrorWithCause("the client certificate Vault issued: "+err.Error(), errtype.Vault, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		// Members are reached by the inventory's addresses, which their
		// certificates need not name: the chain to etcd's CA is what is
		// checked.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyChain(raw, roots)
		},
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &client{http: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: timeout}, tls: cfg, timeout: timeout}, nil
}

func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("no certificate presented")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// call posts a JSON request to etcd's gateway.
func (c *client) call(ctx context.Context, endpoint, path string, req, out any) error {
	body, _ := json.Marshal(req)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(endpoint, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s: %s", endpoint, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func invalid(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
}
