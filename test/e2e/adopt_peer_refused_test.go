//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/test/e2e/framework"
)

// TestAdoptPeerRefused adopts a source whose members admit one certificate name on their peer
// port (--peer-cert-allowed-cn, the chart's certificate's), which Steward's members do not carry.
// The preflight cannot see that rule; the first learner is the probe: its etcd is turned away by
// every source member and exits, and Steward says so with the peers' own answer instead of
// removing and re-adding learners. The source keeps every member and its quorum (a learner counts
// for none), and an abort takes the learner out and leaves the source as it was.
func TestAdoptPeerRefused(t *testing.T) {
	t.Parallel()
	version := etcdVersion()
	ns := f.Namespace(t)
	src := withSourceTLS(t, framework.BitnamiEtcd{Namespace: ns, Name: adoptSourceName, Replicas: 3, Image: f.EtcdImage(version)})
	src.TLS.PeerAllowedCN = src.TLS.Member.Cert.Subject.CommonName
	src = startBitnamiOf(t, src)
	app := hostClient(t, src, src.ClientURL())
	clusterID, _ := clusterIDAndRevision(t, app)
	before := memberSet(t, app)

	created := time.Now()
	createAdopting(t, ns, src, version)
	var said string
	f.WaitFor(t, ns, "the refusal of Steward's learner in status", 4*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, adoptClusterName)
		if err != nil {
			return false, err
		}
		if a := ec.Status.Adoption; a != nil && strings.Contains(a.Message, "refuse its peer certificate") {
			said = a.Message
			return true, nil
		}
		return false, fmt.Errorf("adoption %s", adoptionSummary(ctx, ns))
	})
	refused := time.Since(created)
	for _, want := range []string{"tls: bad certificate", "--peer-cert-allowed-cn", "spec.bootstrap.join.abort"} {
		if !strings.Contains(said, want) {
			t.Errorf("status.adoption.message %q does not say %q", said, want)
		}
	}

	// Nothing of the source changed but the learner: every source member is there, voting.
	during := memberSet(t, app)
	var learners []member
	for _, m := range during {
		if m.learner {
			learners = append(learners, m)
		}
	}
	if len(learners) != 1 || len(during) != len(before)+1 {
		t.Errorf("members while refused %v, want the source's %v and one learner", during, before)
	}
	for _, m := range before {
		if !slices.ContainsFunc(during, func(d member) bool { return d.id == m.id && !d.learner }) {
			t.Errorf("source member %s is not a voter while Steward is refused: %v", m, during)
		}
	}
	if stuck := eventsWith(t, ns, adoptClusterName, "RemoveMember"); len(stuck) > 0 {
		t.Errorf("members were removed while the source refused Steward: %v", stuck)
	}

	update(t, ns, adoptClusterName, func(ec *stewardv1.EtcdCluster) { ec.Spec.Bootstrap.Join.Abort = true })
	aborted := time.Now()
	waitAdoptionPhase(t, ns, stewardv1.AdoptionAborted, 3*time.Minute)
	after := memberSet(t, app)
	if !slices.EqualFunc(after, before, func(a, b member) bool { return a.id == b.id && !a.learner }) {
		t.Errorf("members after the abort %v, want the source's %v", after, before)
	}
	if id, _ := clusterIDAndRevision(t, app); id != clusterID {
		t.Errorf("cluster ID %s after the abort, %s before", id, clusterID)
	}
	t.Logf("MEASURE adopt peer refused: refusal in status +%.1fs after creation; Aborted %.1fs after the abort",
		refused.Seconds(), time.Since(aborted).Seconds())
}
