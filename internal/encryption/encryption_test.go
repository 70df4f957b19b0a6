package encryption

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
)

func newIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func keyring(t *testing.T, ids ...*age.X25519Identity) *Keyring {
	t.Helper()
	var b strings.Builder
	b.WriteString("# created: by a test\n")
	for _, id := range ids {
		b.WriteString("# public key: " + id.Recipient().String() + "\n" + id.String() + "\n")
	}
	k, err := ParseKeyring([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func seal(t *testing.T, k *Keyring, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := k.Seal(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func open(k *Keyring, sealed []byte, keyID string) ([]byte, error) {
	r, err := k.Open(bytes.NewReader(sealed), keyID)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// plain spans several of age's 64 KiB chunks.
func plain(t *testing.T) []byte {
	b := make([]byte, 200<<10)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealOpen(t *testing.T) {
	a := newIdentity(t)
	k := keyring(t, a)
	if k.KeyID() != a.Recipient().String() || !strings.HasPrefix(k.KeyID(), "age1") {
		t.Fatalf("KeyID %q, want the public recipient %q", k.KeyID(), a.Recipient())
	}
	p := plain(t)
	s := seal(t, k, p)
	if !Sealed(s) || Sealed(p) {
		t.Errorf("Sealed: sealed %t, plain %t", Sealed(s), Sealed(p))
	}
	// The sealed bytes hold no run of the plain ones: a raw read learns nothing.
	if bytes.Contains(s, p[:32]) {
		t.Error("the plain bytes are readable in the sealed object")
	}
	// The identity never appears in the sealed object.
	if bytes.Contains(s, []byte(a.String())) {
		t.Error("the key is in the object")
	}
	got, err := open(k, s, k.KeyID())
	if err != nil || !bytes.Equal(got, p) {
		t.Fatalf("open: %d bytes, %v", len(got), err)
	}
}

// A rotation: the new key first seals; objects sealed under the old key still open; a keyring
// that dropped the old key refuses them, naming the key they need.
func TestRotation(t *testing.T) {
	old, next := newIdentity(t), newIdentity(t)
	before := keyring(t, old)
	p := plain(t)
	sealedOld := seal(t, before, p)

	after := keyring(t, next, old)
	if after.KeyID() != next.Recipient().String() {
		t.Errorf("after the rotation KeyID %q, want the new key's", after.KeyID())
	}
	if ids := after.KeyIDs(); len(ids) != 2 || ids[1] != old.Recipient().String() {
		t.Errorf("KeyIDs %v", ids)
	}
	if got, err := open(after, sealedOld, before.KeyID()); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("an old object after the rotation: %v", err)
	}
	sealedNew := seal(t, after, p)
	if _, err := open(before, sealedNew, after.KeyID()); !errors.Is(err, ErrNoKey) {
		t.Errorf("a new object with the old keyring: %v, want ErrNoKey", err)
	}
	dropped := keyring(t, next)
	_, err := open(dropped, sealedOld, before.KeyID())
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), before.KeyID()) || !strings.Contains(err.Error(), next.Recipient().String()) {
		t.Errorf("the old key dropped: %v, want ErrNoKey naming the key needed and the one held", err)
	}
	if strings.Contains(err.Error(), "AGE-SECRET-KEY") {
		t.Errorf("an error quotes a key: %v", err)
	}
}

// Every flipped byte and every cut is an error on open or on read, never other plain bytes.
func TestDamageIsAnError(t *testing.T) {
	k := keyring(t, newIdentity(t))
	p := []byte(strings.Repeat("etcd ", 30000)) // three chunks
	s := seal(t, k, p)
	for _, i := range []int{0, 10, len(s) / 3, len(s) / 2, len(s) - 17, len(s) - 1} {
		c := bytes.Clone(s)
		c[i] ^= 0x40
		if got, err := open(k, c, ""); err == nil {
			t.Errorf("byte %d of %d flipped: %d bytes read without an error", i, len(s), len(got))
		}
	}
	for _, n := range []int{0, 50, len(s) / 2, len(s) - 1} {
		if got, err := open(k, s[:n], ""); err == nil {
			t.Errorf("cut at %d of %d: %d bytes read without an error", n, len(s), len(got))
		}
	}
	if _, err := open(k, p[:1000], ""); err == nil || errors.Is(err, ErrNoKey) {
		t.Errorf("a plain object: %v, want a not-sealed error", err)
	}
}

func TestParseKeyringRefuses(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "age identity file"},
		{"a public key", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n", "age identity file"},
		{"a password", "hunter2\n", "age identity file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyring([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error quotes the input: %v", err)
			}
		})
	}
}
