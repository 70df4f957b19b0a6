package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type run struct {
	code           int
	stdout, stderr string
	result         map[string]any // parsed from the result file
	raw            []byte
}

// runCLI runs `steward snapshot args...` in process with the given environment and a result file.
func runCLI(t *testing.T, env map[string]string, args ...string) run {
	t.Helper()
	resultFile := filepath.Join(t.TempDir(), "result.json")
	args = append(args[:1:1], append([]string{"--result-file", resultFile}, args[1:]...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, args, func(k string) string { return env[k] }, &stdout, &stderr)
	r := run{code: code, stdout: stdout.String(), stderr: stderr.String()}
	r.raw, _ = os.ReadFile(resultFile)
	if len(r.raw) > 0 {
		if err := json.Unmarshal(r.raw, &r.result); err != nil {
			t.Fatalf("result file is not JSON: %v\n%s", err, r.raw)
		}
		if string(r.raw) != r.stdout {
			t.Errorf("stdout and the result file differ:\n%s\n%s", r.stdout, r.raw)
		}
	}
	return r
}

func TestUsageErrors(t *testing.T) {
	vol := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"save", "--volume-dir", vol, "--backup-key", "a/b/c"}, "--endpoint is required"},
		{[]string{"save", "--endpoint", "10.0.0.1:2379", "--volume-dir", vol, "--backup-key", "a/b/c"}, "want a client URL"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--backup-key", "a/b/c"}, "no destination"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--volume-dir", vol, "--s3-endpoint", "http://x", "--backup-key", "a"}, "not both"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--s3-endpoint", "http://x", "--backup-key", "a"}, "--s3-bucket is required"},
		{[]string{"delete", "--volume-dir", vol}, "give --backup-key"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--volume-dir", vol}, "give --backup-key, or --namespace, --cluster and --backup"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--volume-dir", vol, "--backup-key", "a", "--compression", "gzip"}, "want zstd or none"},
		{[]string{"save", "--endpoint", "https://127.0.0.1:2379", "--volume-dir", vol, "--backup-key", "a", "--cert", "c.pem"}, "--cert and --key go together"},
		{[]string{"save", "--endpoint", "http://127.0.0.1:2379", "--volume-dir", vol, "--backup-key", "a", "--cacert", "ca.pem"}, "use https://"},
		{[]string{"save", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"fetch", "--volume-dir", vol, "--backup-key", "a"}, "--out is required"},
		{[]string{"save", "extra"}, "unexpected arguments"},
		{[]string{"restore", "--stage", vol}, "--snapshot, --stage, --data-dir and --name are required"},
	} {
		r := runCLI(t, nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.result["error"].(string), tc.want) {
			t.Errorf("%v: exit %d, result %s; want exit 2 and %q", tc.args, r.code, r.raw, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"explode"}, os.Getenv, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "want save, fetch, verify, delete or restore") {
		t.Errorf("unknown command: %d %s", code, stderr.String())
	}
}

// The result stays within Kubernetes' 4096-byte termination message, however long the error, and
// stays valid JSON (multi-byte characters are not cut in half).
func TestResultFitsATerminationMessage(t *testing.T) {
	long := strings.Repeat("étcd refused <because> \"quoted\" ", 400)
	line := encodeResult(map[string]any{"error": long, "revision": json.Number("12345678901")})
	if len(line) > MaxResult {
		t.Fatalf("%d bytes", len(line))
	}
	var back map[string]any
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if e := back["error"].(string); !strings.HasPrefix(e, "étcd refused") || !strings.HasSuffix(e, "…") || back["revision"].(float64) != 12345678901 {
		t.Errorf("result %s", line)
	}
	if small := encodeResult(map[string]any{"error": "short"}); string(small) != "{\"error\":\"short\"}\n" {
		t.Errorf("a short result changed: %s", small)
	}
}

// Without --result-file the default path is written only where it exists (in a container).
func TestDefaultResultFileOnlyInAContainer(t *testing.T) {
	if _, err := os.Stat(DefaultResultFile); err == nil {
		t.Fatalf("%s exists on this machine; the test cannot tell", DefaultResultFile)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"fetch", "--volume-dir", t.TempDir(), "--backup-key", "a"}, os.Getenv, &stdout, &stderr)
	if code != 2 || !strings.Contains(stdout.String(), "--out is required") {
		t.Errorf("exit %d, stdout %s", code, stdout.String())
	}
	if _, err := os.Stat(DefaultResultFile); err == nil {
		t.Errorf("%s was created", DefaultResultFile)
	}
}

// Without --s3-endpoint the bucket is Amazon S3's (the EtcdBackup API leaves the endpoint empty
// for AWS); the prefix is part of the object keys the results report.
func TestS3DefaultsToAmazon(t *testing.T) {
	d := destination{s3Bucket: "backups", s3Prefix: "etcd", s3Region: "eu-west-1"}
	store, err := d.store(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if loc, key := store.Location("db/demo/b1"), objectKey(store, "db/demo/b1"); loc != "s3://backups/etcd/db/demo/b1" || key != "etcd/db/demo/b1" {
		t.Errorf("location %s, key %s", loc, key)
	}
}
