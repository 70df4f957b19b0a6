// Package encryption seals backup objects (snapshots and segments) under keys the user holds, with
// age (filippo.io/age): an authenticated stream (ChaCha20-Poly1305 in 64 KiB chunks) whose file
// key is wrapped to a recipient, so an object is written in one pass with bounded memory and read
// back only whole and unaltered. No cryptography is written here: age does all of it.
//
// Keys. A Keyring is the text of an age identity file (what age-keygen prints), from a Secret: the
// first identity seals, every identity opens. Rotation is a new identity put first, the old ones
// kept below it for as long as objects sealed under them are kept. An object names the key that
// sealed it by its KeyID, the identity's public recipient ("age1..."): public, so it may stand in
// manifests, object metadata and status; the identity itself is never written anywhere.
package encryption

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
)

// Keyring holds the identities of one Secret.
type Keyring struct {
	seal       age.Recipient
	sealID     string
	identities []age.Identity
	ids        []string
}

// ParseKeyring reads an age identity file: one or more identities, one per line, "#" comments.
func ParseKeyring(text []byte) (*Keyring, error) {
	ids, err := age.ParseIdentities(bytes.NewReader(text))
	if err != nil {
		// age's errors quote no key material; keep its words.
		return nil, fmt.Errorf("the encryption key is not an age identity file (age-keygen's output): %w", err)
	}
	k := &Keyring{identities: ids}
	for i, id := range ids {
		r, rid, err := recipientOf(id)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if i == 0 {
			k.seal, k.sealID = r, rid
		}
		k.ids = append(k.ids, rid)
	}
	return k, nil
}

func recipientOf(id age.Identity) (age.Recipient, string, error) {
	switch v := id.(type) {
	case *age.X25519Identity:
		r := v.Recipient()
		return r, r.String(), nil
	case *age.HybridIdentity:
		r := v.Recipient()
		return r, r.String(), nil
	}
	return nil, "", fmt.Errorf("an identity of type %T: want an X25519 or hybrid age identity", id)
}

// KeyID is the public recipient of the key that seals.
func (k *Keyring) KeyID() string { return k.sealID }

// KeyIDs are the public recipients of every key, the sealing one first.
func (k *Keyring) KeyIDs() []string { return append([]string(nil), k.ids...) }

// Seal returns a writer that seals what is written to it into w under the first key; Close
// finishes the stream (an object without its last chunk does not open).
func (k *Keyring) Seal(w io.Writer) (io.WriteCloser, error) {
	return age.Encrypt(w, k.seal)
}

// ErrNoKey is returned (wrapped) when an object is sealed under a key the keyring does not hold.
var ErrNoKey = errors.New("the encryption key is not in the Secret")

// Open returns a reader of what r was sealed from. keyID is the key the object says sealed it
// (empty when unknown), for the error. A keyring without that key is ErrNoKey; an object altered
// or cut short fails on the read that reaches the damage, never with plausible bytes.
func (k *Keyring) Open(r io.Reader, keyID string) (io.Reader, error) {
	out, err := age.Decrypt(r, k.identities...)
	var nomatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &nomatch):
		if keyID == "" {
			keyID = "an unrecorded key"
		}
		return nil, fmt.Errorf("%w: the object was sealed under %s; the Secret holds %s",
			ErrNoKey, keyID, strings.Join(k.ids, ", "))
	case err != nil:
		return nil, fmt.Errorf("the object is not sealed with age or its header is damaged: %w", err)
	}
	return out, nil
}

// Sealed says whether b (an object's first bytes) starts like an age-sealed object, so an object
// sealed but not marked so is still refused clearly instead of parsed as garbage.
func Sealed(b []byte) bool {
	return bytes.HasPrefix(b, []byte("age-encryption.org/"))
}
