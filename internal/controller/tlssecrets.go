package controller

import (
	"crypto/x509"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// Keys of the CA Secret besides pki's: the next CA during a rotation.
const (
	keyNextCA    = "next-ca.crt"
	keyNextCAKey = "next-ca.key"
)

func tlsSecret(ec *stewardv1.EtcdCluster, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ec.Namespace,
		Labels: map[string]string{stewardv1.LabelCluster: ec.Name, resources.LabelManagedBy: "steward"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
}

// parseCASecret reads the current and next CA. A Secret that exists but does not parse is an
// error: Steward never replaces a CA it cannot read, since members trust it.
func parseCASecret(s *corev1.Secret) (cur, next *pki.CA, err error) {
	cur, err = pki.LoadCA(s.Data[pki.KeyCA], s.Data[pki.KeyCAKey])
	if err != nil {
		return nil, nil, err
	}
	if len(s.Data[keyNextCA]) > 0 {
		next, err = pki.LoadCA(s.Data[keyNextCA], s.Data[keyNextCAKey])
	}
	return cur, next, err
}

func fillCASecret(s *corev1.Secret, w *tlsplan.CAWrite, rotateCA string) error {
	s.Data = map[string][]byte{}
	put := func(certKey, keyKey string, ca *pki.CA) error {
		key, err := ca.KeyPEM()
		s.Data[certKey], s.Data[keyKey] = ca.CertPEM(), key
		return err
	}
	if err := put(pki.KeyCA, pki.KeyCAKey, w.Current); err != nil {
		return err
	}
	if w.Next != nil {
		if err := put(keyNextCA, keyNextCAKey, w.Next); err != nil {
			return err
		}
	}
	if rotateCA != "" {
		s.Annotations = map[string]string{stewardv1.AnnotationRotateCA: rotateCA}
	}
	return nil
}

// parseLeaf reads a certificate and its key; nil when either is missing or broken (the leaf is
// then re-issued, which is what an operator-managed Secret wants).
func parseLeaf(certPEM, keyPEM []byte) *pki.Leaf {
	certs, err := pki.ParseCertsPEM(certPEM)
	if err != nil {
		return nil
	}
	key, err := pki.ParseKeyPEM(keyPEM)
	if err != nil {
		return nil
	}
	return &pki.Leaf{Cert: certs[0], Key: key, Chain: certs[1:]}
}

func parseMemberSecret(s *corev1.Secret) *tlsplan.MemberSecret {
	ms := &tlsplan.MemberSecret{
		Server: parseLeaf(s.Data[resources.KeyServerCert], s.Data[resources.KeyServerKey]),
		Peer:   parseLeaf(s.Data[resources.KeyPeerCert], s.Data[resources.KeyPeerKey]),
	}
	trust, err := pki.ParseBundle(s.Data[resources.KeyPeerCA])
	if err != nil || ms.Server == nil || ms.Peer == nil {
		return nil
	}
	ms.Trust = trust
	if ct, err := pki.ParseBundle(s.Data[resources.KeyClientCA]); err == nil && tlsplan.FormatTrust(ct) != tlsplan.FormatTrust(trust) {
		ms.ClientTrust = ct
	}
	return ms
}

func fillMemberSecret(s *corev1.Secret, ms *tlsplan.MemberSecret) error {
	server, err := ms.Server.Material(ms.ClientBundle()...)
	if err != nil {
		return err
	}
	peer, err := ms.Peer.Material(ms.Trust...)
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{
		resources.KeyServerCert: server.Cert, resources.KeyServerKey: server.Key,
		resources.KeyPeerCert: peer.Cert, resources.KeyPeerKey: peer.Key,
		// With the Operator source one CA serves both planes, so the two bundles are equal; the
		// peer port tells peers from clients by pki.PeerIdentity.
		resources.KeyPeerCA: peer.CA, resources.KeyClientCA: server.CA,
	}
	return nil
}

func parseClientSecret(s *corev1.Secret) *tlsplan.Material {
	leaf := parseLeaf(s.Data[pki.KeyCert], s.Data[pki.KeyKey])
	trust, err := pki.ParseBundle(s.Data[pki.KeyCA])
	if leaf == nil || err != nil {
		return nil
	}
	return &tlsplan.Material{Leaf: leaf, Trust: trust}
}

func fillClientSecret(s *corev1.Secret, m *tlsplan.Material) error {
	mat, err := m.Leaf.Material(m.Trust...)
	if err != nil {
		return err
	}
	s.Type = corev1.SecretTypeTLS
	s.Data = map[string][]byte{pki.KeyCert: mat.Cert, pki.KeyKey: mat.Key, pki.KeyCA: mat.CA}
	return nil
}

func certsOf(cas ...*pki.CA) []*x509.Certificate {
	var out []*x509.Certificate
	for _, ca := range cas {
		if ca != nil {
			out = append(out, ca.Cert)
		}
	}
	return out
}
