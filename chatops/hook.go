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

	"kedge.dev/kedge/slackmsg"
)

// HookRequest is the body of POST /hooks/run.
type HookRequest struct {
	Runbook string `json:"runbook"`
	// Inventory names a cluster of the config's clusters (never a path).
	Inventory string         `json:"inventory"`
	Params    map[string]any `json:"params,omitempty"`
	// RequestID makes every request that carries it start one run, ever
	// (the X-Kedge-Request-Id header says the same). Without it, the same
	// signed bytes start one run, and a request equal to one whose run is
	// still open answers with that run.
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
	hr, err := decodeHook(r, body)
	if err != nil {
		s.audit(sub, "start", "invalid", err.Error())
		fail(err)
		return
	}
	key, _ := s.Config.key(v.Key)
	req := &startRequest{Subject: sub, Runbook: hr.Runbook, Cluster: hr.Inventory, Params: hr.Params, RequestID: hr.RequestID,
		Signed: signed{Secret: key, MAC: v.MAC, At: v.At}}
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
		return nil, refuse(http.StatusBadRequest, "runbook: %q is not a runbook name", slackmsg.Clip(hr.Runbook))
	}
	if !clusterNameRE.MatchString(hr.Inventory) {
		return nil, refuse(http.StatusBadRequest, "inventory: %q is not a cluster name from the config", slackmsg.Clip(hr.Inventory))
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
