package chatops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"
)

// HookRequest is the body of POST /hooks/run.
type HookRequest struct {
	Runbook string `json:"runbook"`
	// Inventory names a cluster of the config's clusters (never a path).
	Inventory string         `json:"inventory"`
	Params    map[string]any `json:"params,omitempty"`
	// RequestID makes retries of one request start one run (the
	// X-Kedge-Request-Id header says the same). Without it, a request
	// equal to one whose run is still open answers with that run.
	RequestID string `json:"requestId,omitempty"`
}

// HookResponse is the answer of POST /hooks/run.
type HookResponse struct {
	Status     string `json:"status"` // started, existing
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	URL        string `json:"url"`
}

// hookTimeout bounds a webhook request's Temporal calls.
const hookTimeout = 10 * time.Second

func (s *Server) hookRun(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		writeJSON(w, statusOf(err), map[string]string{"error": messageOf(err)})
	}
	body, err := readBody(w, r)
	if err != nil {
		s.auditUnauthenticated(r, err)
		fail(err)
		return
	}
	v, err := verifyHook(s.Config, r.Header, body, s.now())
	if err != nil {
		s.auditUnauthenticated(r, err)
		fail(err)
		return
	}
	sub := Subject{Source: SourceWebhook, Key: v.Key}
	// The same signed bytes again (a replay, or a client's retry) get the
	// first answer and start nothing, whatever became of the first run.
	prev, first := s.replays.claim(v.MAC, v.Expires, s.now())
	if !first {
		if prev == nil {
			err := refuse(http.StatusConflict, "this signed request is being handled; send it again to get its answer")
			s.audit(sub, "start", "refused", "replayed request: "+err.Msg)
			fail(err)
			return
		}
		resp := *prev
		resp.Status = "existing"
		s.audit(sub, "start", "allowed", "replayed request: answered with the run it started", "workflowId", resp.WorkflowID, "runId", resp.RunID)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	started := false
	defer func() {
		if !started {
			s.replays.release(v.MAC) // nothing started: the same request may be tried again
		}
	}()
	hr, err := decodeHook(r, body)
	if err != nil {
		s.audit(sub, "start", "invalid", err.Error())
		fail(err)
		return
	}
	req := &startRequest{Subject: sub, Runbook: hr.Runbook, Cluster: hr.Inventory, Params: hr.Params, RequestID: hr.RequestID}
	if req.Params == nil {
		req.Params = map[string]any{}
	}
	attrs := []any{"runbook", hr.Runbook, "cluster", hr.Inventory}
	in, err := s.prepare(req)
	if err != nil {
		s.audit(sub, "start", outcomeOf(err), err.Error(), attrs...)
		fail(err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), hookTimeout)
	defer cancel()
	st, err := s.start(ctx, req, in)
	if st != nil {
		started = true
		s.replays.finish(v.MAC, HookResponse{Status: "started", WorkflowID: st.WorkflowID, RunID: st.RunID, URL: st.URL})
	}
	if err != nil {
		s.audit(sub, "start", outcomeOf(err), err.Error(), attrs...)
		fail(err)
		return
	}
	attrs = append(attrs, "workflowId", st.WorkflowID, "runId", st.RunID)
	resp := HookResponse{Status: "started", WorkflowID: st.WorkflowID, RunID: st.RunID, URL: st.URL}
	status := http.StatusCreated
	if st.Existing {
		resp.Status, status = "existing", http.StatusOK
		s.audit(sub, "start", "allowed", "repeated request: answered with the run it started", attrs...)
	} else {
		s.audit(sub, "start", "allowed", "", attrs...)
	}
	writeJSON(w, status, resp)
}

// decodeHook reads a /hooks/run body strictly.
func decodeHook(r *http.Request, body []byte) (*HookRequest, error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, refuse(http.StatusUnsupportedMediaType, "want Content-Type application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var hr HookRequest
	if err := dec.Decode(&hr); err != nil {
		return nil, refuse(http.StatusBadRequest, "malformed JSON body: %v (want {\"runbook\": NAME, \"inventory\": CLUSTER, \"params\": {...}})", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return nil, refuse(http.StatusBadRequest, "malformed JSON body: more than one value")
	}
	if !runbookNameRE.MatchString(hr.Runbook) {
		return nil, refuse(http.StatusBadRequest, "runbook: %q is not a runbook name", clip(hr.Runbook))
	}
	if !clusterNameRE.MatchString(hr.Inventory) {
		return nil, refuse(http.StatusBadRequest, "inventory: %q is not a cluster name from the config", clip(hr.Inventory))
	}
	if h := r.Header.Get(HeaderReq); h != "" {
		if hr.RequestID != "" && hr.RequestID != h {
			return nil, refuse(http.StatusBadRequest, "requestId and %s differ", HeaderReq)
		}
		hr.RequestID = h
	}
	if len(hr.RequestID) > 200 {
		return nil, refuse(http.StatusBadRequest, "requestId is longer than 200 bytes")
	}
	return &hr, nil
}
