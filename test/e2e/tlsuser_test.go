//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
)

// userCA plays the user who brings their own certificates: a CA, wildcard leaves for the two
// planes, and the application's client certificate.
type userCA struct {
	t        *testing.T
	ns, name string
	ca       *pki.CA
}

func newUserCA(t *testing.T, ns, name string) *userCA {
	ca, err := pki.NewCA(name+"-user", ns, time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &userCA{t: t, ns: ns, name: name, ca: ca}
}

// writePlanes writes the peer and client Secrets the cluster reads, with trust as ca.crt.
func (u *userCA) writePlanes(trust ...*pki.CA) {
	members := "*." + u.name + "." + u.ns + ".svc"
	u.write(u.name+"-peer", pki.Peer, []string{members}, trust)
	u.write(u.name+"-server", pki.Server, []string{members, resources.ClientServiceName(u.name) + "." + u.ns + ".svc"}, trust)
}

// writeApp writes the application client Secret clientFor reads.
func (u *userCA) writeApp(trust ...*pki.CA) {
	u.write(resources.ClientTLSSecretName(u.name), pki.Client, nil, trust)
}

func (u *userCA) write(secret string, usage pki.Usage, dns []string, trust []*pki.CA) {
	t := u.t
	leaf, err := u.ca.Issue(u.name+"-"+string(usage), usage, dns, time.Now(), 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var cas []*x509.Certificate
	for _, c := range trust {
		cas = append(cas, c.Cert)
	}
	m, err := leaf.Material(cas...)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: secret}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{pki.KeyCert: m.Cert, pki.KeyKey: m.Key, pki.KeyCA: m.CA}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Client.Create(ctx, s); err == nil {
		return
	}
	var cur corev1.Secret
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Data = s.Data
	if err := f.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
}

// A cluster on the user's Secrets: it comes up on them; a new CA in the Secrets is rolled in the
// three passes with at most one member unavailable and no write lost; deleting a Secret fails
// closed, naming it, with no member touched.
func TestTLSUserSecrets(t *testing.T) {
	t.Parallel()
	ns := f.Namespace(t)
	old := newUserCA(t, ns, "byo")
	old.writePlanes(old.ca)
	old.writeApp(old.ca)
	create(t, newCluster(ns, "byo", 3, "", func(ec *stewardv1.EtcdCluster) {
		ec.Spec.TLS = &stewardv1.TLSSpec{
			// Every client here reloads its Secret: no wait for clients that load theirs once.
			DropOldCAAfter: &metav1.Duration{Duration: 90 * time.Second},
			Peer:           stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "byo-peer"},
			Client:         stewardv1.TLSPlane{Source: stewardv1.TLSSourceSecret, SecretName: "byo-server"},
		}
	}))
	measure(t, "user Secrets: apply to settled, 3 PVC", waitSettled(t, ns, "byo", 3, 4*time.Minute))
	data := putData(t, clientFor(t, ns, "byo"), "/byo/", 20)

	// The user's CA rotation: every Secret gets the new CA's leaves, the planes' ca.crt holds only
	// the new CA, the application trusts both until the members present new leaves.
	next := newUserCA(t, ns, "byo")
	w := watchRoll(t, ns, "byo", 3)
	passes := watchPasses(t, ns, "byo")
	old.writeApp(old.ca, next.ca)
	w.changed = time.Now()
	next.writePlanes(next.ca)
	// The application switches to a new-signed certificate once every member trusts both CAs.
	f.WaitFor(t, ns, "the SwapLeaves pass", 4*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "byo")
		if err != nil || ec.Status.TLS == nil {
			return false, err
		}
		return ec.Status.TLS.Rotation == "SwapLeaves" || ec.Status.TLS.Rotation == "DropOldCA", fmt.Errorf("pass %q", ec.Status.TLS.Rotation)
	})
	next.writeApp(old.ca, next.ca)
	f.WaitFor(t, ns, "rotation finished", 6*time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "byo")
		if err != nil || ec.Status.TLS == nil {
			return false, err
		}
		if ec.Status.TLS.Rotation != "" {
			return false, fmt.Errorf("pass %q", ec.Status.TLS.Rotation)
		}
		return settled(ns, "byo", 3)(ctx)
	})
	w.finish("user CA rotation PVC", 1)
	var order []string
	for _, p := range passes.stop() {
		order = append(order, p.pass)
	}
	if !slices.Equal(order, []string{"WidenTrust", "SwapLeaves", "DropOldCA"}) {
		t.Errorf("passes %v, want WidenTrust, SwapLeaves, DropOldCA", order)
	}
	fp := pki.Fingerprint(next.ca.Cert)
	podsOn(t, ns, "byo", 3, "trusting only the user's new CA", func(p *corev1.Pod) bool {
		return p.Annotations[stewardv1.AnnotationTrust] == fp
	})
	checkData(t, clientFor(t, ns, "byo"), "/byo/", data)

	// Fail closed.
	before := uids(t, ns, "byo")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "byo-peer"}}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, ns, "TLSMaterialValid=False naming byo-peer", time.Minute, func(ctx context.Context) (bool, error) {
		ec, err := get(ctx, ns, "byo")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, "TLSMaterialValid")
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "byo-peer") {
			return false, fmt.Errorf("%s", condition(ec, "TLSMaterialValid"))
		}
		return true, nil
	})
	assertPodsUntouched(t, ns, "byo", before, "a missing user Secret must not rebuild anything")
}
