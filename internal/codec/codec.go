package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/secretfile"
)

// Metadata of a sealed payload.
const (
	Encoding        = "binary/encrypted"
	MetadataKeyID   = "encryption-key-id"
	MetadataBinding = "kedge-bound-to"
	metadataEncoder = "encoding"
	keySize         = 32
)

// EnvKeyFile names the key file when no flag does.
const EnvKeyFile = "KEDGE_CODEC_KEY"

// Codec seals and opens payloads with the keys of one key file.
//
// A payload sealed where the SDK says what it is for (a serialization
// context: the namespace and workflow of a workflow's input, update or
// query; that and the activity type of an activity's input, result or
// heartbeat) is bound to it: the binding is authenticated data of the
// seal and is checked when a worker opens the payload in a context, so a
// sealed payload copied into another run, another workflow ID or another
// activity fails to open. Without a context (the Web UI's codec server, a
// client reading a memo) any binding opens.
type Codec struct {
	active string
	keys   map[string]cipher.AEAD
	// raw are a full key file's keys (queue keys are derived from them),
	// order their ids as the file lists them; queue is the task queue a
	// queue key file's keys are for ("" for a full file: queue.go).
	raw     map[string][]byte
	order   []string
	queue   string
	derived *sync.Map // "ID/QUEUE" -> cipher.AEAD
	// bind is this view's binding ("" without a context).
	bind *binding
	// acceptUnbound lets payloads sealed before bindings existed open in
	// a context, and schedule actions sealed before they were bound to
	// their schedule open in the schedule's runs: for the runs in flight
	// when workers are upgraded.
	acceptUnbound bool
	// replayedIn is the namespace a replayed history was recorded in
	// (ReplayedIn).
	replayedIn string
}

var (
	_ converter.PayloadCodec                         = (*Codec)(nil)
	_ converter.PayloadCodecWithSerializationContext = (*Codec)(nil)
)

// Load reads a key file. Its errors name the file and the line.
func Load(path string) (*Codec, error) {
	if path == "" {
		return nil, ErrNoPath
	}
	// A secret like every other: its owner's alone, and owned by the
	// user reading it or root (whoever owns it could put a key of their
	// own in its place, and read every run).
	data, err := secretfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("codec key file: %w", err)
	}
	c := &Codec{keys: map[string]cipher.AEAD{}, raw: map[string][]byte{}, derived: &sync.Map{}}
	scoped := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		id, b64, ok := strings.Cut(text, " ")
		b64 = strings.TrimSpace(b64)
		if !ok || id == "" || b64 == "" {
			return nil, fmt.Errorf("%s:%d: want \"ID BASE64-KEY\"", path, line)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(key) != keySize {
			return nil, fmt.Errorf("%s:%d: key %s: want %d bytes in base64", path, line, id, keySize)
		}
		id, queue, isQueue := strings.Cut(id, QueueKeySep)
		switch {
		case len(c.keys) > 0 && isQueue != scoped:
			return nil, fmt.Errorf("%s:%d: key %s: a key file holds full keys or one task queue's keys, not both", path, line, id)
		case isQueue && c.queue != "" && queue != c.queue:
			return nil, fmt.Errorf("%s:%d: key %s is task queue %s's, the file's first is %s's: one queue a file", path, line, id, queue, c.queue)
		case isQueue && CheckQueueName(queue) != nil:
			return nil, fmt.Errorf("%s:%d: key %s: %w", path, line, id, CheckQueueName(queue))
		}
		scoped = isQueue
		if _, dup := c.keys[id]; dup {
			return nil, fmt.Errorf("%s:%d: key id %s appears twice", path, line, id)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		c.keys[id] = aead
		c.order = append(c.order, id)
		if isQueue {
			c.queue = queue
		} else {
			c.raw[id] = key
		}
		if c.active == "" {
			c.active = id
		}
	}
	if c.active == "" {
		return nil, fmt.Errorf("%s: no key", path)
	}
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Generate writes a new key file at path (mode 0600), refusing to
// overwrite one.
func Generate(path string) (id string, err error) {
	if path == "" {
		return "", ErrNoPath
	}
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id = "kedge-" + hex.EncodeToString(suffix)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("codec key file: %w", err)
	}
	_, err = fmt.Fprintf(f, "# Kedge payload encryption keys: the first line seals, every line opens.\n%s %s\n", id, base64.StdEncoding.EncodeToString(key))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return id, err
}

// DefaultPath is where the CLI, the worker and `kedge dev` look for the
// key file when neither a flag nor $KEDGE_CODEC_KEY names one: the user's
// config directory, or "" when there is none (never a shared temporary
// directory, where anyone could plant or read a key).
func DefaultPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kedge", "codec.key")
}

// ErrNoPath is a key file path that is not given and has no default.
var ErrNoPath = errors.New("no codec key file: give --codec-key or $KEDGE_CODEC_KEY (there is no user config directory for the default: $HOME and $XDG_CONFIG_HOME are unset)")

// ActiveKey is the id of the key that seals: with a queue key file, the
// id and the queue ("ID/QUEUE").
func (c *Codec) ActiveKey() string {
	if c.queue != "" {
		return c.active + QueueKeySep + c.queue
	}
	return c.active
}

// AEAD is the AES-256-GCM of the key with that id, for what seals with
// the codec key outside Temporal's payloads (internal/sealstream: etcd
// snapshots): "ID" a full key, "ID/QUEUE" a queue's key (a full key file
// derives it). ErrUnknownKey when the key file has no such key,
// ErrQueueKey when a queue key file is asked for another's.
func (c *Codec) AEAD(id string) (cipher.AEAD, error) {
	id, queue, _ := strings.Cut(id, QueueKeySep)
	return c.aeadFor(id, queue)
}

// AcceptUnbound returns a codec that also opens, in a context, payloads
// sealed by a Kedge without bindings, and a schedule action sealed for
// its workflow ID alone in the runs of that ID and a time: only while the
// runs started before an upgrade finish (`kedge worker
// --accept-unbound-payloads`).
func (c *Codec) AcceptUnbound() *Codec {
	cp := *c
	cp.acceptUnbound = true
	return &cp
}

// sdkReplayNamespace is the namespace the SDK's replayer runs every
// history in, whatever namespace it was recorded in (the SDK's
// internal.ReplayNamespace, which it does not export).
const sdkReplayNamespace = "ReplayNamespace"

// ReplayedIn returns a codec for replaying histories recorded in namespace
// (replay tests, a worker's pre-upgrade check): the SDK replays them in a
// namespace of its own, and the payloads are bound to the one they were
// sealed in. Outside the SDK's replayer it is the codec as it was.
func (c *Codec) ReplayedIn(namespace string) *Codec {
	cp := *c
	cp.replayedIn = namespace
	return &cp
}

// WithSerializationContext is the codec bound to where the SDK uses it.
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	b := bindingOf(sc)
	if b == nil {
		return c
	}
	if b.Namespace == sdkReplayNamespace && c.replayedIn != "" {
		b.Namespace = c.replayedIn
	}
	cp := *c
	cp.bind = b
	return &cp
}

// Encode seals each payload whole (metadata and data), bound to this
// view's context when it has one.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	var bound []byte
	queue := ""
	if c.bind != nil {
		bound = c.bind.encode()
		queue = c.bind.Queue
	}
	aead, err := c.aeadFor(c.active, queue)
	if err != nil {
		return nil, err
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		sealed := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, err
		}
		sealed = aead.Seal(sealed, sealed, plain, additionalData(c.active, bound))
		md := map[string][]byte{metadataEncoder: []byte(Encoding), MetadataKeyID: []byte(c.active)}
		if bound != nil {
			md[MetadataBinding] = bound
		}
		out[i] = &commonpb.Payload{Metadata: md, Data: sealed}
	}
	return out, nil
}

// SealScheduleAction seals v as the action of the schedule scheduleID in
// namespace, whose runs Temporal names actionID, "-" and a time: it opens
// in those runs only, never under actionID itself or any other ID, and
// the run's admission asks the schedule whether it started the run. The
// payload goes into the schedule's action as it is (the SDK sends a
// *commonpb.Payload argument unchanged).
func (c *Codec) SealScheduleAction(namespace, scheduleID, actionID string, v any) (*commonpb.Payload, error) {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		return nil, err
	}
	cp := *c
	cp.bind = &binding{Kind: "schedule", Namespace: namespace, Workflow: actionID, Schedule: scheduleID}
	out, err := cp.Encode([]*commonpb.Payload{p})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ErrUnknownKey is a payload sealed with a key this codec does not have.
var ErrUnknownKey = errors.New("payload sealed with a key not in the key file")

// ErrUnsealed is a payload not sealed with a Kedge key: made by a client
// without the key, which may start nothing a worker runs.
var ErrUnsealed = errors.New("payload not sealed with Kedge's codec key: refused (only holders of the key may start or drive runbooks)")

// Decode opens sealed payloads. Any other payload is refused
// (ErrUnsealed), but for the SDK's nil value, which carries no data: the
// key is the capability to start and drive runbooks, so a workflow
// started, signalled or updated by a client without it fails to decode
// and runs nothing.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return c.decode(payloads, true)
}

// isNil reports whether p is the SDK's encoding of a nil value.
func isNil(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[metadataEncoder]) == converter.MetadataEncodingNil && len(p.GetData()) == 0
}

func (c *Codec) decode(payloads []*commonpb.Payload, strict bool) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[metadataEncoder]) != Encoding {
			if strict && !isNil(p) {
				return nil, ErrUnsealed
			}
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		bound, hasBinding := p.GetMetadata()[MetadataBinding]
		if strict && c.bind != nil {
			if err := c.bind.admits(bound, hasBinding, c.acceptUnbound); err != nil {
				return nil, err
			}
		}
		queue := ""
		if !hasBinding {
			bound = nil
		} else if b, err := decodeBinding(bound); err == nil {
			queue = b.Queue
		}
		aead, err := c.aeadFor(id, queue)
		if err != nil {
			return nil, err
		}
		if len(p.Data) < aead.NonceSize() {
			return nil, fmt.Errorf("sealed payload too short")
		}
		n := aead.NonceSize()
		plain, err := aead.Open(nil, p.Data[:n], p.Data[n:], additionalData(id, bound))
		if err != nil {
			return nil, fmt.Errorf("open payload sealed with key %s: %w", id, err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, err
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is Temporal's default converter with this codec.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Apply sets the data converter and a failure converter that also seals
// error messages and stack traces.
func (c *Codec) Apply(o *client.Options) {
	dc := c.DataConverter()
	o.DataConverter = dc
	o.FailureConverter = newFailures(dc)
}

// failures seals error messages and stack traces as payloads are sealed,
// bound to where the SDK converts them: an activity's error with its
// queue's key (a site's worker holds no other), a workflow's with the
// full key. (The SDK's default failure converter would seal them with
// the codec outside any context.)
//
// In an activity's context it also reads only failures the activity's
// queue vouches for: a failure a worker reports (an application
// failure, anywhere in the chain) must carry attributes sealed for that
// activity on that queue, or it is refused before the SDK reads it.
// Without this a site's worker could fail another site's step (and
// start its undo) by answering its task with a failure it made up. What
// the server makes (timeouts) carries no seal and stands; the causes it
// wraps are checked.
type failures struct {
	converter.FailureConverter
	dc converter.DataConverter
	// activity is the activity whose failures this view reads; nil
	// outside an activity's context and for local activities (run in the
	// workflow's own worker).
	activity *binding
}

var _ converter.FailureConverterWithSerializationContext = (*failures)(nil)

func newFailures(dc converter.DataConverter) *failures {
	return &failures{dc: dc, FailureConverter: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true,
	})}
}

// WithSerializationContext is the converter for sc.
func (f *failures) WithSerializationContext(sc converter.SerializationContext) converter.FailureConverter {
	out := newFailures(converter.WithDataConverterSerializationContext(f.dc, sc))
	if a, ok := sc.(converter.ActivitySerializationContext); ok && !a.IsLocal {
		out.activity = bindingOf(sc)
	}
	return out
}

// FailureToError is the SDK's conversion, after the vouching check in an
// activity's context.
func (f *failures) FailureToError(failure *failurepb.Failure) error {
	if f.activity != nil {
		if err := f.vouched(failure); err != nil {
			return temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s's failure on task queue %s refused: %v", f.activity.Activity, f.activity.Queue, err), errtype.RefusedFailure, err)
		}
	}
	return f.FailureConverter.FailureToError(failure)
}

// vouched checks that every application failure in the chain carries
// attributes that open in this view's context.
func (f *failures) vouched(failure *failurepb.Failure) error {
	for n := failure; n != nil; n = n.GetCause() {
		if n.GetApplicationFailureInfo() == nil {
			continue
		}
		if n.GetEncodedAttributes() == nil {
			return errors.New("not sealed (made without the queue's key)")
		}
		var attrs map[string]any
		if err := f.dc.FromPayload(n.GetEncodedAttributes(), &attrs); err != nil {
			return err
		}
	}
	return nil
}
