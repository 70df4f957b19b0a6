package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/objstore"
)

// newKeyring is a keyring of the given identities, the first sealing.
func newKeyring(t *testing.T, ids ...*age.X25519Identity) *encryption.Keyring {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		text.WriteString(id.String() + "\n")
	}
	k, err := encryption.ParseKeyring([]byte(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A sealed backup: the stored object is age's and holds none of the keyspace; the manifest names
// the key's public ID and never the key; it is fetched with the key, with a rotated keyring that
// still holds it, and refused clearly without it or under another key, nothing written.
func TestSaveSealedThenFetch(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "secret-key-", 300, 200)
	oldKey, newKey, otherKey := newIdentity(t), newIdentity(t), newIdentity(t)
	for _, c := range []Compression{CompressionZstd, CompressionNone} {
		store := volume(t)
		opts := saveOpts(c)
		opts.Keys = newKeyring(t, oldKey)
		m, err := Save(ctx, cli, store, opts)
		if err != nil {
			t.Fatal(err)
		}
		if m.Encryption != EncryptionAge || m.KeyID != oldKey.Recipient().String() || m.Object != c.ObjectName()+".age" {
			t.Fatalf("%s: manifest encryption %q key %q object %q", c, m.Encryption, m.KeyID, m.Object)
		}
		raw := readAll(t, store, opts.Key+"/"+m.Object)
		if !encryption.Sealed(raw) || bytes.Contains(raw, []byte("secret-key-")) {
			t.Fatalf("%s: the stored object is not sealed or shows the keyspace", c)
		}
		man := readAll(t, store, opts.Key+"/"+ManifestName)
		if bytes.Contains(man, []byte("AGE-SECRET-KEY")) || !bytes.Contains(man, []byte(m.KeyID)) {
			t.Fatalf("%s: manifest %s: want the key ID and never the key", c, man)
		}

		dir := t.TempDir()
		for _, tc := range []struct {
			name string
			keys *encryption.Keyring
			want string // "" fetches
		}{
			{"no key", nil, "give the encryption key"},
			{"another key", newKeyring(t, otherKey), m.KeyID},
			{"the key", newKeyring(t, oldKey), ""},
			{"rotated: a new key first, the old one kept", newKeyring(t, newKey, oldKey), ""},
		} {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".db")
			res, err := Fetch(ctx, store, opts.Key, out, FetchOptions{Keys: tc.keys})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s, %s: %v", c, tc.name, err)
			case tc.want == "" && (res.Scan.Revision != m.Revision || res.SHA256 != m.SHA256):
				t.Errorf("%s, %s: fetched revision %d sha %s, manifest %d %s", c, tc.name, res.Scan.Revision, res.SHA256, m.Revision, m.SHA256)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s, %s: error %v, want one naming %q", c, tc.name, err, tc.want)
			case tc.want != "" && exists(out):
				t.Errorf("%s, %s: refused but wrote %s", c, tc.name, out)
			}
		}
		if _, err := Fetch(ctx, store, opts.Key, filepath.Join(dir, "x.db"), FetchOptions{Keys: newKeyring(t, otherKey)}); !errors.Is(err, encryption.ErrNoKey) {
			t.Errorf("%s: under another key: %v, want ErrNoKey", c, err)
		}
	}
}

// A sealed object fetched by its own key, with neither manifest nor metadata saying it is sealed,
// is still refused as sealed without the key, and opened with it.
func TestFetchUnmarkedSealedObject(t *testing.T) {
	ctx := tctx(t)
	_, cli := startEtcd(t)
	fill(t, cli, "k", 50, 100)
	saved := volume(t)
	opts := saveOpts(CompressionNone)
	id := newIdentity(t)
	opts.Keys = newKeyring(t, id)
	m, err := Save(ctx, cli, saved, opts)
	if err != nil {
		t.Fatal(err)
	}
	bare := volume(t)
	if _, err := bare.Put(ctx, "by-hand/snapshot.bin", bytes.NewReader(readAll(t, saved, opts.Key+"/"+m.Object)), nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "s.db")
	if _, err := Fetch(ctx, bare, "by-hand/snapshot.bin", out, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "sealed with age") {
		t.Errorf("unmarked sealed object without a key: %v", err)
	}
	res, err := Fetch(ctx, bare, "by-hand/snapshot.bin", out, FetchOptions{Keys: newKeyring(t, id)})
	if err != nil || res.Scan.Revision != m.Revision {
		t.Errorf("unmarked sealed object with its key: revision %d, %v; want %d", res.Scan.Revision, err, m.Revision)
	}
}

func readAll(t *testing.T, store objstore.Store, key string) []byte {
	t.Helper()
	rc, _, err := store.Get(tctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
