package fleetlockclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// State is a step of the protocol's client state machine.
type State string

// The client's states, in the order of an update.
const (
	// StateInitialization: just started (or rebooted); any slot held
	// before must be released (steady-state) before anything else.
	StateInitialization State = "initialization"
	// StateSteady: steady-state acknowledged; waiting for an update.
	StateSteady State = "steady"
	// StatePreReboot: an update is staged; asking for a reboot slot.
	StatePreReboot State = "pre-reboot"
	// StateFinalization: the slot is held; finalizing and rebooting.
	StateFinalization State = "finalization"
)

// The protocol's endpoints, relative to the base URL, and its header.
const (
	preRebootPath   = "v1/pre-reboot"
	steadyStatePath = "v1/steady-state"
	protocolHeader  = "fleet-lock-protocol"
	defaultGroup    = "default"
	maxAnswer       = 64 << 10
)

// ErrOutOfOrder is a step asked for in a state it does not follow.
var ErrOutOfOrder = errors.New("out of the protocol's client order")

// Rejection is a server's answer other than 200.
type Rejection struct {
	Endpoint string // pre-reboot or steady-state
	Status   int
	// Kind and Value are the protocol's error value; Kind is
	// generic_http_STATUS when the body is not one.
	Kind, Value string
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("fleetlock %s: server answered %d %s: %s", r.Endpoint, r.Status, r.Kind, r.Value)
}

// Client is one node's FleetLock client.
type Client struct {
	base *url.URL
	http *http.Client
	body []byte

	mu    sync.Mutex
	state State
}

// New returns a client in state initialization for the base URL (as in
// Zincati's [updates.fleet_lock] base_url), the client ID and the group
// ("" is "default", Zincati's default). A nil httpClient is
// http.DefaultClient.
func New(baseURL string, id, group string, httpClient *http.Client) (*Client, error) {
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("fleetlock base URL: %w", err)
	}
	if !base.IsAbs() {
		return nil, fmt.Errorf("fleetlock base URL %q is not absolute", baseURL)
	}
	if id == "" {
		return nil, errors.New("fleetlock client: empty id")
	}
	if group == "" {
		group = defaultGroup
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	type params struct {
		ID    string `json:"id"`
		Group string `json:"group"`
	}
	body, err := json.MarshalIndent(struct {
		ClientParams params `json:"client_params"`
	}{params{ID: id, Group: group}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("fleetlock client body: %w", err)
	}
	return &Client{base: base, http: httpClient, body: body, state: StateInitialization}, nil
}

// State is the client's state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// step checks that the client is in state from.
func (c *Client) step(op string, from State) error {
	if s := c.State(); s != from {
		return fmt.Errorf("fleetlock %s in state %s: %w", op, s, ErrOutOfOrder)
	}
	return nil
}

// move goes from state from to state to, unless another step moved first.
func (c *Client) move(from, to State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == from {
		c.state = to
	}
}

// SteadyState reports steady state (UnlockIfHeld), from initialization;
// acknowledged, the client is steady.
func (c *Client) SteadyState(ctx context.Context) error {
	if err := c.step("steady-state", StateInitialization); err != nil {
		return err
	}
	if err := c.post(ctx, "steady-state", steadyStatePath); err != nil {
		return err
	}
	c.move(StateInitialization, StateSteady)
	return nil
}

// UpdateStaged says an update was found and staged: a steady client goes
// to pre-reboot. It sends nothing.
func (c *Client) UpdateStaged() error {
	if err := c.step("update-staged", StateSteady); err != nil {
		return err
	}
	c.move(StateSteady, StatePreReboot)
	return nil
}

// PreReboot asks for a reboot slot (RecursiveLock), from pre-reboot;
// granted, the client is finalizing. Not granted, reason is why (the
// server's value, or the request's failure) and err a *Rejection or the
// request's error.
func (c *Client) PreReboot(ctx context.Context) (granted bool, reason string, err error) {
	if err := c.step("pre-reboot", StatePreReboot); err != nil {
		return false, err.Error(), err
	}
	if err := c.post(ctx, "pre-reboot", preRebootPath); err != nil {
		var rej *Rejection
		if errors.As(err, &rej) {
			return false, rej.Value, err
		}
		return false, err.Error(), err
	}
	c.move(StatePreReboot, StateFinalization)
	return true, "", nil
}

// Reboot says the node finalized its update and rebooted: the client
// starts again in initialization. It sends nothing.
func (c *Client) Reboot() error {
	if err := c.step("reboot", StateFinalization); err != nil {
		return err
	}
	c.move(StateFinalization, StateInitialization)
	return nil
}

// LockUntilGranted asks for a reboot slot every interval until it is
// granted, or ctx ends (its error then wraps ctx's and says the last
// reason).
func (c *Client) LockUntilGranted(ctx context.Context, interval time.Duration) error {
	return c.until(ctx, interval, "pre-reboot", func() (string, error) {
		_, reason, err := c.PreReboot(ctx)
		return reason, err
	})
}

// UnlockUntilAcknowledged reports steady state every interval until it
// is acknowledged, or ctx ends.
func (c *Client) UnlockUntilAcknowledged(ctx context.Context, interval time.Duration) error {
	return c.until(ctx, interval, "steady-state", func() (string, error) {
		err := c.SteadyState(ctx)
		var rej *Rejection
		if errors.As(err, &rej) {
			return rej.Value, err
		}
		if err != nil {
			return err.Error(), err
		}
		return "", nil
	})
}

// until repeats try every interval until it succeeds, fails out of order,
// or ctx ends.
func (c *Client) until(ctx context.Context, interval time.Duration, what string, try func() (string, error)) error {
	if interval <= 0 {
		return fmt.Errorf("fleetlock %s: interval %s is not positive", what, interval)
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	last := ""
	for {
		reason, err := try()
		if err == nil || errors.Is(err, ErrOutOfOrder) {
			return err
		}
		// An attempt cut short by ctx's end says nothing of the server:
		// the answer before it stands.
		if ctx.Err() == nil || last == "" {
			last = reason
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleetlock %s not done (last: %s): %w", what, last, ctx.Err())
		case <-t.C:
		}
	}
}

// post sends one of the protocol's requests; nil is 200.
func (c *Client) post(ctx context.Context, endpoint, path string) error {
	u := c.base.ResolveReference(&url.URL{Path: path})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(c.body))
	if err != nil {
		return fmt.Errorf("fleetlock %s: %w", endpoint, err)
	}
	req.Header.Set(protocolHeader, "true")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("fleetlock %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	rej := &Rejection{Endpoint: endpoint, Status: resp.StatusCode}
	var pe struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	}
	if err == nil && json.Unmarshal(data, &pe) == nil && pe.Kind != "" && pe.Value != "" {
		rej.Kind, rej.Value = pe.Kind, pe.Value
	} else {
		rej.Kind, rej.Value = "generic_http_"+strconv.Itoa(resp.StatusCode), "(no protocol error value)"
	}
	return rej
}
