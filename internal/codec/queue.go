package codec

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Queue keys. An activity's payloads (its input, result, heartbeats and
// failure) are sealed with a key derived from the codec key for the task
// queue the activity was scheduled on: HKDF-SHA256 of the key, for
// "kedge activity payloads of task queue " and the queue's name. A full key
// file derives every queue's key; a site's worker is given its queue's
// keys alone (`kedge codec derive --queue`, lines "ID/QUEUE BASE64").
// With them it runs its queue's activities and nothing else: it cannot
// open a workflow's input or another queue's activities, and a result it
// seals opens only as a result of its own queue's activities, so a site
// worker that is taken over cannot make another site's step succeed.

// ErrQueueKey is a payload a queue's key file cannot seal or open: a
// workflow's, or another queue's activity's.
var ErrQueueKey = errors.New("this key file holds one task queue's keys only")

// queueKeyInfo is HKDF's info for a queue's key.
const queueKeyInfo = "kedge activity payloads of task queue "

// QueueKeySep separates a key's id from its queue in a queue key file and
// in the key ids etcd snapshots sealed with a queue's key name.
const QueueKeySep = "/"

// Queue is the task queue whose keys alone this codec holds ("" for a
// full key file).
func (c *Codec) Queue() string { return c.queue }

// deriveQueueKey is the queue's key derived from a full key.
func deriveQueueKey(key []byte, queue string) ([]byte, error) {
	return hkdf.Key(sha256.New, key, nil, queueKeyInfo+queue, keySize)
}

// aeadFor is the AEAD that seals and opens payloads of key id for queue
// ("": not an activity's payload, or one sealed before queue keys).
func (c *Codec) aeadFor(id, queue string) (cipher.AEAD, error) {
	if c.queue != "" {
		if queue != c.queue {
			if queue == "" {
				return nil, fmt.Errorf("%w (%s): it seals and opens only that queue's activity payloads, not a workflow's", ErrQueueKey, c.queue)
			}
			return nil, fmt.Errorf("%w (%s), not queue %s's", ErrQueueKey, c.queue, queue)
		}
		return c.key(id)
	}
	if queue == "" {
		return c.key(id)
	}
	name := id + QueueKeySep + queue
	if a, ok := c.derived.Load(name); ok {
		return a.(cipher.AEAD), nil
	}
	raw, ok := c.raw[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	k, err := deriveQueueKey(raw, queue)
	if err != nil {
		return nil, err
	}
	a, err := newAEAD(k)
	if err != nil {
		return nil, err
	}
	c.derived.Store(name, a)
	return a, nil
}

func (c *Codec) key(id string) (cipher.AEAD, error) {
	a, ok := c.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	return a, nil
}

// WriteQueueKeys writes the keys of queue derived from every key of this
// (full) key file, in its order, as a queue key file's lines.
func (c *Codec) WriteQueueKeys(w io.Writer, queue string) error {
	if c.queue != "" {
		return fmt.Errorf("%w (%s): derive from the full key file", ErrQueueKey, c.queue)
	}
	if err := CheckQueueName(queue); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "# Kedge payload keys of task queue %s alone: its worker runs that queue's activities and nothing else.\n", queue); err != nil {
		return err
	}
	for _, id := range c.order {
		k, err := deriveQueueKey(c.raw[id], queue)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s%s%s %s\n", id, QueueKeySep, queue, base64.StdEncoding.EncodeToString(k)); err != nil {
			return err
		}
	}
	return nil
}

// CheckQueueName refuses a queue name a key id cannot carry.
func CheckQueueName(queue string) error {
	if queue == "" || strings.ContainsAny(queue, " \t\r\n"+QueueKeySep) {
		return fmt.Errorf("task queue %q: want a name without spaces or %q", queue, QueueKeySep)
	}
	return nil
}
