package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/etcd"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// userSecretPoll is how often a cluster on user Secrets is looked at when nothing else happens:
// those Secrets carry no label of Steward's, so they are read directly instead of watched.
const userSecretPoll = 10 * time.Second

// userSource says whether the cluster's certificates come from Secrets Steward does not issue:
// the user's, or cert-manager's.
func userSource(ec *stewardv1.EtcdCluster) bool {
	return ec.Spec.TLS != nil && (ec.Spec.TLS.Peer.Source == stewardv1.TLSSourceSecret || certManagerSource(ec))
}

// loadUser reads and validates the user's Secrets. Any problem is returned as a message naming the
// Secret and key; the plan then holds every Pod start and disruption (fail closed).
func (r *EtcdClusterReconciler) loadUser(ctx context.Context, ec *stewardv1.EtcdCluster, members []string) (*tlsplan.UserTLS, string, error) {
	if certManagerSource(ec) {
		if msg, err := r.ensureCertificates(ctx, ec); msg != "" || err != nil {
			return nil, msg, err
		}
	}
	peerSecret, serverSecret := userSecretNames(ec)
	var hosts []string
	for _, m := range members {
		hosts = append(hosts, resources.MemberHost(ec.Name, ec.Namespace, m))
	}
	client := resources.ClientServiceName(ec.Name) + "." + ec.Namespace + ".svc"
	peer, msg, err := r.userPlane(ctx, ec.Namespace, peerSecret, pki.Expect{Usage: pki.Peer, DNSNames: hosts})
	if msg != "" || err != nil {
		return nil, msg, err
	}
	cl, msg, err := r.userPlane(ctx, ec.Namespace, serverSecret, pki.Expect{Usage: pki.Server, DNSNames: append(hosts, client)})
	if msg != "" || err != nil {
		return nil, msg, err
	}
	return &tlsplan.UserTLS{Peer: *peer, Client: *cl}, "", nil
}

func (r *EtcdClusterReconciler) userPlane(ctx context.Context, ns, name string, exp pki.Expect) (*tlsplan.Material, string, error) {
	var s corev1.Secret
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("Secret %s not found: the members' certificates come from it (spec.tls: source Secret, or "+
			"written by cert-manager with source CertManager)", name), nil
	}
	if err != nil {
		return nil, "", err
	}
	m := pki.Material{Cert: s.Data[pki.KeyCert], Key: s.Data[pki.KeyKey], CA: s.Data[pki.KeyCA]}
	if err := pki.Validate(m, exp, r.now()); err != nil {
		return nil, fmt.Sprintf("Secret %s key %v", name, err), nil
	}
	leaf := parseLeaf(m.Cert, m.Key)
	trust, err := pki.ParseBundle(m.CA)
	if leaf == nil || err != nil {
		return nil, fmt.Sprintf("Secret %s: unreadable after validation", name), nil
	}
	return &tlsplan.Material{Leaf: leaf, Trust: trust}, "", nil
}

func (r *EtcdClusterReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// userCredentials: with user Secrets Steward holds no CA, so it presents the client plane's
// certificate (it carries client auth) and trusts the client plane's CAs, those the members run
// with and those of the user's Secret, so it reaches every member through a rotation.
func (r *EtcdClusterReconciler) userCredentials(ctx context.Context, ec *stewardv1.EtcdCluster, u *tlsplan.UserTLS) error {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace(ec.Namespace), client.MatchingLabels{stewardv1.LabelCluster: ec.Name}); err != nil {
		return err
	}
	var roots []*x509.Certificate
	var leaves []*pki.Leaf
	if u != nil {
		roots, leaves = append(roots, u.Client.Trust...), append(leaves, u.Client.Leaf)
	}
	for i := range list.Items {
		if ms := parseMemberSecret(&list.Items[i]); ms != nil {
			roots, leaves = append(roots, ms.ClientBundle()...), append(leaves, ms.Server)
		}
	}
	seen := map[string]bool{}
	var certs []tls.Certificate
	for _, l := range leaves {
		if fp := pki.Fingerprint(l.Cert); !seen[fp] {
			seen[fp] = true
			certs = append(certs, tls.Certificate{Certificate: [][]byte{l.Cert.Raw}, PrivateKey: l.Key, Leaf: l.Cert})
		}
	}
	r.Etcd.Credentials(string(ec.UID)).Set(pki.Bundle(roots...), certs)
	return nil
}

// servedPeerLeaves records the leaf each member presents on its peer port. Only the certificate
// is read: the handshake is not verified and nothing is sent (the peer port wants a peer's
// certificate, which Steward does not present).
func servedPeerLeaves(ctx context.Context, o *observed) map[string]*x509.Certificate {
	return dialMembers(o, resources.PeerPort, func(addr string) (*x509.Certificate, error) {
		return etcd.PresentedCertificate(ctx, addr)
	})
}

// dialMembers asks every member's Pod at once, so an unreachable one costs one timeout, not one
// per member.
func dialMembers(o *observed, port int, get func(addr string) (*x509.Certificate, error)) map[string]*x509.Certificate {
	out := map[string]*x509.Certificate{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range o.pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || o.members[name] == nil {
			continue
		}
		addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
		wg.Go(func() {
			if c, err := get(addr); err == nil {
				mu.Lock()
				out[name] = c
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}
