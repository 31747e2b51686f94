package codec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"

	"kedge.dev/kedge/internal/secretfile"
)

func newKeyFile(t *testing.T) (string, *Codec) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "codec.key")
	if _, err := Generate(path); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

func TestSealedPayloadsHideTheirContentAndRoundTrip(t *testing.T) {
	_, c := newKeyFile(t)
	dc := c.DataConverter()
	secret := map[string]string{"token": "abcdef.0123456789abcdef", "key": "-----BEGIN EC PRIVATE KEY-----"}
	p, err := dc.ToPayload(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("0123456789abcdef")) || bytes.Contains(p.Data, []byte("PRIVATE KEY")) {
		t.Fatal("the sealed payload holds the secret in plain text")
	}
	if string(p.Metadata["encoding"]) != Encoding || string(p.Metadata[MetadataKeyID]) != c.ActiveKey() {
		t.Errorf("metadata = %q", p.Metadata)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["token"] != secret["token"] {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestTamperedOrForeignPayloadsAreRefused(t *testing.T) {
	_, c := newKeyFile(t)
	_, other := newKeyFile(t)
	sealed, err := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decode(sealed); err == nil || !strings.Contains(err.Error(), c.ActiveKey()) {
		t.Errorf("a codec without the key: %v", err)
	}
	sealed[0].Data[len(sealed[0].Data)-1] ^= 1
	if _, err := c.Decode(sealed); err == nil {
		t.Error("a tampered payload opened")
	}
	// A payload from a client without the key is refused, whatever it
	// says; the SDK's nil value (no data) is not a payload anyone made.
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"vault":{"address":"http://evil"}}`)}
	if _, err := c.Decode([]*commonpb.Payload{plain}); !errors.Is(err, ErrUnsealed) {
		t.Errorf("an unsealed payload: %v, want ErrUnsealed", err)
	}
	forged := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}, Data: []byte("x")}
	if _, err := c.Decode([]*commonpb.Payload{forged}); !errors.Is(err, ErrUnsealed) {
		t.Errorf("a nil payload with data: %v, want ErrUnsealed", err)
	}
	null := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}}
	if out, err := c.Decode([]*commonpb.Payload{null}); err != nil || out[0] != null {
		t.Errorf("the SDK's nil value: %v", err)
	}
	// The Web UI's codec server shows an unsealed payload as it is.
	if out, err := (viewer{c}).Decode([]*commonpb.Payload{plain}); err != nil || out[0] != plain {
		t.Errorf("the viewer refused an unsealed payload: %v", err)
	}
}

func TestRotationOpensWithOldKeysAndSealsWithTheFirst(t *testing.T) {
	oldPath, old := newKeyFile(t)
	newPath, _ := newKeyFile(t)
	oldText, _ := os.ReadFile(oldPath)
	newText, _ := os.ReadFile(newPath)
	both := filepath.Join(t.TempDir(), "both.key")
	if err := os.WriteFile(both, append(newText, oldText...), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(both)
	if err != nil {
		t.Fatal(err)
	}
	sealedByOld, _ := old.Encode([]*commonpb.Payload{{Data: []byte("before rotation")}})
	out, err := c.Decode(sealedByOld)
	if err != nil || string(out[0].Data) != "before rotation" {
		t.Fatalf("old payload after rotation: %v", err)
	}
	if c.ActiveKey() == old.ActiveKey() {
		t.Error("the first line's key should seal")
	}
}

func TestKeyFileErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		text, want string
		mode       os.FileMode
	}{
		"short":  {"# c\nk1 c2hvcnQ=\n", "short:2: key k1: want 32 bytes", 0o600},
		"form":   {"just-one-field\n", "form:1: want \"ID BASE64-KEY\"", 0o600},
		"empty":  {"# nothing\n", "empty: no key", 0o600},
		"public": {"k1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "is open to other users (mode 0644)", 0o644},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tc.text), tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Generate(filepath.Join(dir, "short")); err == nil {
		t.Error("Generate overwrote an existing file")
	}
}

// A key file another account owns is refused, even at mode 0600: that
// account could put a key of its own in its place and read every run.
func TestAKeyFileSomeoneElseOwnsIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file away takes root")
	}
	p := filepath.Join(t.TempDir(), "codec.key")
	if _, err := Generate(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	var oe *secretfile.OwnerError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), p) {
		t.Fatalf("a key file owned by uid 65534 loaded, or was refused for another reason: %v", err)
	}
	if err := os.Chown(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Errorf("root's own key file: %v", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Without a user config directory there is no default key path (never a
// shared temporary directory), and loading or making a key says so.
func TestNoDefaultPathWithoutAConfigDir(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	if p := DefaultPath(); p != "" {
		t.Fatalf("default path %q without a config directory", p)
	}
	if _, err := Load(""); !errors.Is(err, ErrNoPath) {
		t.Errorf("Load: %v", err)
	}
	if _, err := Generate(""); !errors.Is(err, ErrNoPath) {
		t.Errorf("Generate: %v", err)
	}
}

// AEAD hands out a key by id, for what seals outside Temporal: the
// active key's, which a codec loading the same file opens, and none for
// an id the file does not hold.
func TestAEADByKeyID(t *testing.T) {
	path, c := newKeyFile(t)
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	seal, err := c.AEAD(c.ActiveKey())
	if err != nil {
		t.Fatal(err)
	}
	open, err := again.AEAD(c.ActiveKey())
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, seal.NonceSize())
	if plain, err := open.Open(nil, nonce, seal.Seal(nil, nonce, []byte("snapshot"), nil), nil); err != nil || string(plain) != "snapshot" {
		t.Errorf("sealed with the active key, opened with the same key loaded again: %q, %v", plain, err)
	}
	if _, err := c.AEAD("kedge-00000000"); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "kedge-00000000") {
		t.Errorf("an id not in the file: %v", err)
	}
}
