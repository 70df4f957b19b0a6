package manager

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-steward/steward/internal/memberbinary"
)

func TestOptionsFlags(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{args: nil, check: func(t *testing.T, o Options) {
			if o.EtcdImageRepository != DefaultEtcdImageRepository || o.WatchNamespaces != nil || o.LeaderElect || o.PprofAddr != "" ||
				o.MemberBinaryVolume != memberbinary.Auto {
				t.Errorf("defaults = %+v", o)
			}
		}},
		{args: []string{"--watch-namespaces= a, ,b ", "--etcd-image-repository=reg.local/etcd"}, check: func(t *testing.T, o Options) {
			if !slices.Equal(o.WatchNamespaces, []string{"a", "b"}) || o.EtcdImageRepository != "reg.local/etcd" {
				t.Errorf("parsed = %+v", o)
			}
		}},
		{args: []string{"--etcd-image-repository="}, wantErr: "must not be empty"},
		{args: []string{"--etcd-image-repository=reg.local/etcd@sha256:abc"}, wantErr: "without tag or digest"},
		{args: []string{"--sync-period=5s"}, wantErr: "below one minute"},
		{args: []string{"--max-concurrent-reconciles=0"}, wantErr: "must be at least 1"},
		{args: []string{"--member-binary-volume=volume"}, wantErr: "must be auto, image or copy"},
		{args: []string{"--member-binary-volume=copy"}, check: func(t *testing.T, o Options) {
			if o.MemberBinaryVolume != memberbinary.Copy {
				t.Errorf("parsed = %+v", o)
			}
		}},
		{args: []string{"--pprof-bind-address=:8082"}, check: func(t *testing.T, o Options) {
			if o.PprofAddr != ":8082" {
				t.Errorf("parsed = %+v", o)
			}
		}},
		{args: []string{"--max-concurrent-reconciles=16"}, check: func(t *testing.T, o Options) {
			if o.MaxConcurrentReconciles != 16 {
				t.Errorf("parsed = %+v", o)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
			if o.SyncPeriod != 10*time.Minute && tc.wantErr == "" {
				t.Errorf("sync period = %s", o.SyncPeriod)
			}
		})
	}
}
