package etcd

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-steward/steward/internal/versionguard"
)

// The downgrade calls the controller makes, against a real etcd (the envtest build, 3.6 or later):
// /version's cluster version, validate and enable one minor down, the state every member then
// reports (enabled, target, storage version lowered), cancel, and cancel again (harmless).
func TestDowngradeAgainstRealEtcd(t *testing.T) {
	cl, c := startWithClient(t, 1)
	ep := cl.ClientURLs()[0]
	v, err := c.Versions(tctx(t), ep)
	if err != nil {
		t.Fatal(err)
	}
	server, ok := versionguard.Parse(v.Server)
	if !ok || v.Cluster == "" || server[1] < 6 {
		t.Skipf("versions %+v: the downgrade protocol needs etcd 3.6 or later", v)
	}
	if versionguard.Minor(v.Cluster) != versionguard.Minor(v.Server) {
		t.Fatalf("cluster version %q, server %q", v.Cluster, v.Server)
	}
	lower := strings.Join([]string{"3", string(rune('0' + server[1] - 1))}, ".")
	if _, err := c.Downgrade(tctx(t), clientv3.DowngradeValidate, "3.1"); err == nil {
		t.Error("etcd validated a downgrade of several minors")
	}
	if cv, err := c.Downgrade(tctx(t), clientv3.DowngradeValidate, lower); err != nil || versionguard.Minor(cv) != versionguard.Minor(v.Server) {
		t.Fatalf("validate %s: cluster version %q, %v", lower, cv, err)
	}
	if _, err := c.Downgrade(tctx(t), clientv3.DowngradeEnable, lower); err != nil {
		t.Fatalf("enable %s: %v", lower, err)
	}
	// etcd lowers the storage version and the cluster version in steps of its own (the storage
	// version was once seen lowered before /version's cluster version): both are waited for.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := c.Status(tctx(t), ep)
		v, verr := c.Versions(tctx(t), ep)
		if s.Err == nil && s.DowngradeEnabled && strings.HasPrefix(s.DowngradeTarget, lower+".") &&
			versionguard.Minor(s.StorageVersion) == lower && verr == nil && versionguard.Minor(v.Cluster) == lower {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after enable: enabled %v, target %q, storage %q, err %v; /version %+v, %v", s.DowngradeEnabled,
				s.DowngradeTarget, s.StorageVersion, s.Err, v, verr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for i := range 2 {
		if _, err := c.Downgrade(tctx(t), clientv3.DowngradeCancel, ""); err != nil && !strings.Contains(err.Error(), "no inflight downgrade job") {
			t.Fatalf("cancel #%d: %v", i+1, err)
		}
	}
	if s := c.Status(tctx(t), ep); s.DowngradeEnabled {
		t.Errorf("still enabled after cancel: target %q", s.DowngradeTarget)
	}
}
