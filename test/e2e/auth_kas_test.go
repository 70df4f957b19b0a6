//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// kasPrefix is where the kube-apiserver of TestAuthKubeAPIServer keeps its objects (--etcd-prefix).
const kasPrefix = "/kas-auth"

// TestAuthKubeAPIServer (issue 29): a kube-apiserver as one tenant among others, with auth on from
// the cluster's creation. Its user's role reaches its prefix and the one key it keeps outside it,
// compact_rev_key (the compactor's lock), and nothing else. It starts on its user's Secret (the
// files read once), creates and reads objects, compacts every 10 s, and goes on through a roll of
// every member with auth on: no request locked out, none refused for want of permission. Its
// certificate reads nothing outside the prefix.
func TestAuthKubeAPIServer(t *testing.T) {
	t.Parallel()
	ns := settledCluster(t, "db", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Auth = &stewardv1.AuthSpec{Enabled: true,
			Roles: []stewardv1.AuthRole{{Name: "kube", Permissions: []stewardv1.AuthPermission{
				{Prefix: kasPrefix + "/", Access: stewardv1.AccessReadWrite},
				{Key: "compact_rev_key", Access: stewardv1.AccessReadWrite},
			}}},
			Users: []stewardv1.AuthUser{{Name: "kube-apiserver", Roles: []string{"kube"}}},
		}
	})
	waitAuth(t, ns, "auth on with the kube-apiserver's user ready", 4*time.Minute, func(a *stewardv1.AuthStatus) bool {
		return a.Phase == "On" && len(a.Users) == 1 && a.Users[0].State == "Ready"
	})
	var s corev1.Secret
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-user-kube-apiserver"}, &s); err != nil {
		t.Fatal(err)
	}
	files := framework.EtcdFiles{CA: s.Data[pki.KeyCA], Cert: s.Data[pki.KeyCert], Key: s.Data[pki.KeyKey]}
	proxy := framework.StartTCPProxy(t, clientServiceAddr(t, ns, "db"))
	kas := framework.StartKubeAPIServer(t, f.KubeAPIServer, t.TempDir(), "https://"+proxy.Addr, kasPrefix, files,
		"--etcd-compaction-interval=10s")
	load := startAPILoad(t, kas, "auth")
	time.Sleep(5 * time.Second) // a steady state to compare latency with

	start := time.Now()
	update(t, ns, "db", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.Options.ExtraArgs = map[string]string{"log-outputs": "stderr"}
	})
	waitRolled(t, ns, "db", 3)
	waitSettled(t, ns, "db", 3, 3*time.Minute)
	measure(t, "roll of 3 members with auth on, a kube-apiserver on its own user", time.Since(start))
	h := load.stop()
	logAPILoad(t, "roll with auth on, kube-apiserver on its own user", h, start)
	if failed := h.Lockouts(); len(failed) > 0 {
		t.Errorf("%d kube-apiserver requests failed through the roll: %s", len(failed), firstOps(failed))
	}
	if denied := permissionDenied(h); len(denied) > 0 {
		t.Errorf("%d kube-apiserver requests refused for want of permission: %s", len(denied), firstOps(denied))
	}

	// Its compactor ran with auth on: the lock key outside its prefix, compact_rev_key, is written
	// once an interval (its version counts the compactor's turns). etcd's history is not compacted
	// by it: its Compact call needs root (below), so a read at revision 1 still answers.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shared := clientFor(t, ns, "db")
	var turns int64
	f.WaitFor(t, ns, "the kube-apiserver's compactor turning with auth on", time.Minute, func(ctx context.Context) (bool, error) {
		lock, err := shared.Get(ctx, "compact_rev_key")
		if err != nil || len(lock.Kvs) == 0 {
			return false, fmt.Errorf("compact_rev_key: %v: %w", lock, err)
		}
		turns = lock.Kvs[0].Version
		return turns >= 3, fmt.Errorf("compact_rev_key at version %d", turns)
	})
	_, err := shared.Get(ctx, kasPrefix+"/", clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithKeysOnly())
	// Its Compact call is refused: etcd lets only root compact (its gRPC layer checks it), so with
	// auth on a kube-apiserver on its own user never compacts (docs/auth.md).
	t.Logf("MEASURE kube-apiserver compactor with auth on: compact_rev_key turned %d times; history at revision 1 compacted: %v (%v)",
		turns, errors.Is(err, rpctypes.ErrCompacted), err)
	if _, err := clientWith(t, ns, "db", f.ClientTLS(t, ns, "db-user-kube-apiserver")).Compact(ctx, 1); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the kube-apiserver's user compacting: %v, want permission denied (root only)", err)
	}

	// The same certificate outside the prefix: refused.
	kube := clientWith(t, ns, "db", f.ClientTLS(t, ns, "db-user-kube-apiserver"))
	if _, err := kube.Get(ctx, kasPrefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		t.Errorf("the kube-apiserver's user reading its prefix: %v", err)
	}
	if _, err := kube.Get(ctx, "/other/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the kube-apiserver's user reading outside its prefix: %v, want permission denied", err)
	}
}
