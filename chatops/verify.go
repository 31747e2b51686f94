package chatops

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"kedge.dev/kedge/slackmsg"
)

// Limits every request is held to.
const (
	MaxBody    = 64 << 10        // bytes of a request body
	MaxSkew    = 5 * time.Minute // between a request's timestamp and now
	HeaderKey  = "X-Kedge-Key"
	HeaderSig  = "X-Kedge-Signature"
	HeaderReq  = "X-Kedge-Request-Id"
	slackSig   = "X-Slack-Signature"
	slackStamp = "X-Slack-Request-Timestamp"
)

// httpError is a refusal with the status that fits it.
type httpError struct {
	Status int
	Msg    string
}

func (e *httpError) Error() string { return e.Msg }

func refuse(status int, format string, args ...any) *httpError {
	return &httpError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// readBody reads a request body of at most MaxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBody {
		return nil, refuse(http.StatusRequestEntityTooLarge, "request body is %d bytes; at most %d", r.ContentLength, MaxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, refuse(http.StatusRequestEntityTooLarge, "request body is over %d bytes", MaxBody)
	}
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "reading the request body: %v", err)
	}
	return body, nil
}

// verifySlack checks a request's Slack signature (v0, HMAC-SHA256 of
// "v0:TIMESTAMP:BODY" with the signing secret) and that its timestamp is
// within five minutes, and returns what signed it.
func verifySlack(h http.Header, body []byte, secret string) (signed, error) {
	if err := checkSlack(h, body, secret); err != nil {
		return signed{}, err
	}
	ts := h.Get(slackStamp)
	sec, _ := strconv.ParseInt(ts, 10, 64) // checked by checkSlack
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return signed{Secret: []byte(secret), MAC: m.Sum(nil), At: time.Unix(sec, 0)}, nil
}

func checkSlack(h http.Header, body []byte, secret string) error {
	if secret == "" {
		return refuse(http.StatusServiceUnavailable, "Slack is not configured on this server (no signing secret)")
	}
	sv, err := slack.NewSecretsVerifier(h, secret)
	switch {
	case errors.Is(err, slack.ErrMissingHeaders):
		return refuse(http.StatusUnauthorized, "missing %s or %s header", slackSig, slackStamp)
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return refuse(http.StatusUnauthorized, "stale request: its timestamp is more than %s from now", MaxSkew)
	case err != nil:
		if _, perr := strconv.ParseInt(h.Get(slackStamp), 10, 64); perr != nil {
			return refuse(http.StatusUnauthorized, "bad %s header", slackStamp)
		}
		return refuse(http.StatusUnauthorized, "bad signature")
	}
	if _, err := sv.Write(body); err != nil {
		return refuse(http.StatusUnauthorized, "bad signature")
	}
	if err := sv.Ensure(); err != nil {
		return refuse(http.StatusUnauthorized, "bad signature")
	}
	return nil
}

// SignHook returns the X-Kedge-Signature header of a request sent at t
// with the X-Kedge-Request-Id requestID ("" when it has none):
// "t=UNIX,v1=HEX" where HEX is HMAC-SHA256(key, "UNIX.REQUESTID.BODY").
// The request ID is signed so that a signed request cannot be sent again
// under another ID.
func SignHook(key []byte, t time.Time, requestID string, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(hookMAC(key, ts, requestID, body))
}

func hookMAC(key []byte, ts, requestID string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write([]byte(requestID))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// verifiedHook is a /hooks/run request whose signature matched.
type verifiedHook struct {
	Key string // the key's name
	// MAC is the signature that matched, as this server computed it (a
	// second v1 value or another spelling of the header changes nothing),
	// and At its signed timestamp: what the request's run is named by.
	MAC []byte
	At  time.Time
}

// verifyHook checks a /hooks/run request's key and signature (over its
// timestamp, request ID header and body).
func verifyHook(cfg *Config, h http.Header, body []byte, now time.Time) (verifiedHook, error) {
	name := h.Get(HeaderKey)
	sig := h.Get(HeaderSig)
	if name == "" || sig == "" {
		return verifiedHook{}, refuse(http.StatusUnauthorized, "missing %s or %s header", HeaderKey, HeaderSig)
	}
	key, ok := cfg.key(name)
	if !ok {
		return verifiedHook{}, refuse(http.StatusUnauthorized, "unknown key %q", slackmsg.Clip(name))
	}
	var ts string
	var macs [][]byte
	for _, part := range strings.Split(sig, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if m, err := hex.DecodeString(v); err == nil && len(m) == sha256.Size {
				macs = append(macs, m)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(macs) == 0 {
		return verifiedHook{}, refuse(http.StatusUnauthorized, "malformed %s header (want t=UNIX,v1=HEX)", HeaderSig)
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > MaxSkew || d < -MaxSkew {
		return verifiedHook{}, refuse(http.StatusUnauthorized, "stale request: its timestamp is more than %s from now", MaxSkew)
	}
	want := hookMAC(key, ts, h.Get(HeaderReq), body)
	for _, m := range macs {
		if hmac.Equal(m, want) {
			return verifiedHook{Key: name, MAC: want, At: at}, nil
		}
	}
	return verifiedHook{}, refuse(http.StatusUnauthorized, "bad signature")
}
