package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcd-steward/steward/internal/encryption"
	"github.com/etcd-steward/steward/internal/etcdtest"
	"github.com/etcd-steward/steward/internal/snapshot/snaptest"
)

// keyFile writes an age identity file of ids (the first seals) and returns its path.
func keyFile(t *testing.T, ids ...*age.X25519Identity) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "# public key: %s\n%s\n", id.Recipient(), id)
	}
	p := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// With --encryption-keys-file everything the commands write is sealed (the test reads the objects
// raw), a drill and a point-in-time fetch open it with the key or a rotated keyring that keeps it,
// and a missing or wrong key is a clear error with nothing written.
func TestSealedSaveStreamFetchVerify(t *testing.T) {
	c := etcdtest.Start(t, 1)
	vol := t.TempDir()
	env := map[string]string{"GOMEMLIMIT": "off"}
	cli := etcdClient(t, c)
	ctx := tctx(t)
	ids := make([]*age.X25519Identity, 3)
	for i := range ids {
		var err error
		if ids[i], err = age.GenerateX25519Identity(); err != nil {
			t.Fatal(err)
		}
	}
	key, rotated, other := keyFile(t, ids[0]), keyFile(t, ids[1], ids[0]), keyFile(t, ids[2])

	snaptest.Fill(ctx, t, cli, "/plain-before/", 20, 100)
	save := runCLI(t, env, "save", "--endpoint", c.Members[0].ClientURL, "--volume-dir", vol, "--backup-key", "ns/db/base1", "--encryption-keys-file", key)
	if save.code != 0 || save.result["keyID"] != ids[0].Recipient().String() {
		t.Fatalf("save: %s\n%s", save.raw, save.stderr)
	}
	st := startStream(t, ctx, c.Members[0].ClientURL, vol, "--encryption-keys-file", key)
	var last int64
	for i := range 20 {
		resp, err := cli.Put(ctx, fmt.Sprintf("/plain-after/%d", i), "plain-value")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	waitProgress(t, st.port, last, &st.log)
	st.finish(t)

	// Raw: every object but the manifest is age's, and none shows a key or a value.
	objects := 0
	err := filepath.WalkDir(vol, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "manifest.json") || strings.Contains(p, "/.steward-meta/") {
			return err // the manifest and the volume store's metadata files hold no data
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		objects++
		if !encryption.Sealed(b) || bytes.Contains(b, []byte("plain-")) || !strings.HasSuffix(p, ".age") {
			t.Errorf("%s is not sealed (or not named so): %q", p, b[:min(len(b), 40)])
		}
		return nil
	})
	if err != nil || objects < 2 {
		t.Fatalf("walking %s: %d objects, %v", vol, objects, err)
	}

	verify := runCLI(t, env, "verify", "--volume-dir", vol, "--backup-key", "ns/db/base1", "--etcd", snaptest.Etcd(t),
		"--etcdutl", snaptest.Etcdutl(t), "--work-dir", t.TempDir(), "--encryption-keys-file", rotated)
	if verify.code != 0 || verify.result["verified"] != true {
		t.Errorf("verify with a rotated keyring: exit %d, %s\n%s", verify.code, verify.raw, verify.stderr)
	}
	// The chain's drill: a random revision, replayed, restored and compared whole with the live
	// cluster at that revision; against another cluster the same drill fails.
	drill := func(endpoint string) run {
		return runCLI(t, env, "verify", "--volume-dir", vol, "--pitr-prefix", "ns/db", "--to-random-revision", "--endpoint", endpoint,
			"--etcd", snaptest.Etcd(t), "--etcdutl", snaptest.Etcdutl(t), "--work-dir", t.TempDir(), "--encryption-keys-file", rotated)
	}
	d := drill(c.Members[0].ClientURL)
	if target := num(t, d, "targetRevision"); d.code != 0 || d.result["verified"] != true || target <= num(t, save, "revision") || target > last {
		t.Errorf("chain drill: exit %d, %s\n%s", d.code, d.raw, d.stderr)
	}
	elsewhere := etcdtest.Start(t, 1)
	otherCli := etcdClient(t, elsewhere)
	snaptest.Fill(ctx, t, otherCli, "/other/", int(last)+10, 10) // past every revision of the chain
	if d := drill(elsewhere.Members[0].ClientURL); d.code == 0 || !strings.Contains(fmt.Sprint(d.result["error"]), "the source's at revision") {
		t.Errorf("chain drill against another cluster: exit %d, %s", d.code, d.raw)
	}

	for _, tc := range []struct {
		name string
		keys []string
		want string // "" restores
	}{
		{"the key", []string{"--encryption-keys-file", key}, ""},
		{"rotated", []string{"--encryption-keys-file", rotated}, ""},
		{"no key", nil, "give the encryption key"},
		{"another key", []string{"--encryption-keys-file", other}, "not in the Secret"},
		{"a missing key file", []string{"--encryption-keys-file", filepath.Join(t.TempDir(), "none")}, "is the key Secret there"},
	} {
		out := filepath.Join(t.TempDir(), "s.db")
		r := runCLI(t, env, append([]string{"fetch", "--volume-dir", vol, "--pitr-prefix", "ns/db", "--to-revision", fmt.Sprint(last), "--out", out}, tc.keys...)...)
		switch _, statErr := os.Stat(out); {
		case tc.want == "" && (r.code != 0 || num(t, r, "revision") != last):
			t.Errorf("%s: exit %d, %s\n%s", tc.name, r.code, r.raw, r.stderr)
		case tc.want != "" && (r.code == 0 || !strings.Contains(fmt.Sprint(r.result["error"]), tc.want)):
			t.Errorf("%s: exit %d, %s; want an error naming %q", tc.name, r.code, r.raw, tc.want)
		case tc.want != "" && statErr == nil:
			t.Errorf("%s: refused but wrote %s", tc.name, out)
		}
	}
}

func waitProgress(t *testing.T, port int, rev int64, log io.Writer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if p := progress(port); p.DurableRevision >= rev {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("revision %d not durable in 20s\n%s", rev, log)
}
