package promapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/prometheus"
)

// maxAnswer bounds the alerts API's answer read: thousands of alerts fit.
const maxAnswer = 16 << 20

// Activities asks Prometheus servers.
type Activities struct {
	// Client makes the requests (nil: one that follows no redirect).
	Client *http.Client
}

// client is a's client, or one that follows no redirect: the alerts API
// answers where it is asked.
func (a *Activities) client() *http.Client {
	if a != nil && a.Client != nil {
		return a.Client
	}
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Alerts lists the firing alerts of in.Names (prometheus.alerts).
func (a *Activities) Alerts(ctx context.Context, in prometheus.AlertsInput) (prometheus.AlertsResult, error) {
	if err := prometheus.CheckURL(in.URL); err != nil {
		return prometheus.AlertsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	if err := prometheus.CheckNames(in.Names); err != nil {
		return prometheus.AlertsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	timeout := prometheus.DefaultTimeout
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			msg := fmt.Sprintf("timeout %q is not a positive duration", in.Timeout)
			return prometheus.AlertsResult{}, temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, err)
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	endpoint := strings.TrimSuffix(in.URL, "/") + "/api/v1/alerts"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return prometheus.AlertsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client().Do(req)
	if err != nil {
		return prometheus.AlertsResult{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("ask %s: %v", endpoint, err), errtype.PrometheusUnreachable, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return prometheus.AlertsResult{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("read %s: %v", endpoint, err), errtype.PrometheusUnreachable, err)
	}
	if resp.StatusCode >= 500 {
		msg := fmt.Sprintf("%s answered %s: %s", endpoint, resp.Status, clip(body))
		return prometheus.AlertsResult{}, temporal.NewApplicationError(msg, errtype.PrometheusUnreachable)
	}
	res, err := Firing(resp.StatusCode, body, in.Names, in.Labels)
	if err != nil {
		return prometheus.AlertsResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", endpoint, err), errtype.PrometheusRefused, err)
	}
	return res, nil
}

// answer is the part of /api/v1/alerts's answer read.
type answer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      *struct {
		Alerts []struct {
			Labels   map[string]string `json:"labels"`
			State    string            `json:"state"`
			ActiveAt string            `json:"activeAt"`
		} `json:"alerts"`
	} `json:"data"`
}

// ErrNotAlertsAPI is an answer that is not the alerts API's.
var ErrNotAlertsAPI = errors.New("not an answer of Prometheus's alerts API")

// Firing reads an answer of /api/v1/alerts (its HTTP status and body)
// and keeps the firing alerts named in names whose labels hold labels,
// sorted by name, then by their labels. Pending alerts (waiting out
// their rule's `for`) do not count.
func Firing(status int, body []byte, names []string, labels map[string]string) (prometheus.AlertsResult, error) {
	if len(body) > maxAnswer {
		return prometheus.AlertsResult{}, fmt.Errorf("answer over %d bytes: %w", maxAnswer, ErrNotAlertsAPI)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return prometheus.AlertsResult{}, fmt.Errorf("HTTP %d, %s: %w", status, clip(body), ErrNotAlertsAPI)
	}
	if status != http.StatusOK || a.Status != "success" {
		return prometheus.AlertsResult{}, fmt.Errorf("HTTP %d, status %q: %s %s: %w", status, a.Status, a.ErrorType, a.Error, ErrNotAlertsAPI)
	}
	if a.Data == nil || a.Data.Alerts == nil {
		return prometheus.AlertsResult{}, fmt.Errorf("no data.alerts: %w", ErrNotAlertsAPI)
	}
	res := prometheus.AlertsResult{Firing: []prometheus.Alert{}, Names: []string{}}
	for _, al := range a.Data.Alerts {
		name := al.Labels["alertname"]
		if al.State != "firing" || !slices.Contains(names, name) || !holds(al.Labels, labels) {
			continue
		}
		res.Firing = append(res.Firing, prometheus.Alert{Name: name, Labels: al.Labels, Since: al.ActiveAt})
		if !slices.Contains(res.Names, name) {
			res.Names = append(res.Names, name)
		}
	}
	slices.SortFunc(res.Firing, func(x, y prometheus.Alert) int {
		return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(labelText(x.Labels), labelText(y.Labels)))
	})
	slices.Sort(res.Names)
	return res, nil
}

// holds says whether have has every label of want with its value.
func holds(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// labelText is labels as {k="v", ...}, keys sorted.
func labelText(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// clip is the start of an answer, for an error message.
func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
