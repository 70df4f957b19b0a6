package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
	"github.com/etcd-steward/steward/internal/pki"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// A TLS source is adopted with its own CA (spec.bootstrap.join.caSecretName): Steward copies it
// into the cluster's CA Secret before the first certificate is issued, so its members' peer and
// server certificates and its own client certificate chain to what the source's members and
// clients already trust, and the source's certificates to what Steward's members trust. The
// copy is taken once, when the cluster has no CA Secret yet; from then on the CA Secret is the
// cluster's like any other (a later spec.tls.rotateCA moves off the source's CA).

// Keys the source's CA may come under: kubectl create secret tls (and cert-manager's CA issuers)
// write tls.crt and tls.key; a CA kept as etcd's guides name its files, ca.crt and ca.key.
var sourceCAKeys = [][2]string{{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}, {pki.KeyCA, pki.KeyCAKey}}

// takeSourceCA writes the source's CA as the cluster's CA Secret when there is none yet, and says
// which CA the cluster issues from (or why the source's could not be taken) for the preflight.
// Nothing is written when the source's Secret is missing or is not a CA with its key: the TLS
// plan then holds, since a fresh CA would give Steward's members certificates the source refuses.
// It returns the cluster's CA Secret as read or written: the cache may not hold it yet, and a CA
// Secret missing from the cache would be replaced by a fresh CA.
func (r *EtcdClusterReconciler) takeSourceCA(ctx context.Context, ec *stewardv1.EtcdCluster) (adoption.CA, *corev1.Secret, error) {
	if !adopting(ec) || ec.Spec.Bootstrap.Join.CASecretName == "" {
		return adoption.CA{}, nil, nil
	}
	name := ec.Spec.Bootstrap.Join.CASecretName
	var own corev1.Secret
	key := client.ObjectKey{Namespace: ec.Namespace, Name: resources.CASecretName(ec.Name)}
	// The cache first (every reconcile of the hand-over comes here); only its "not found" is read
	// again live, since the cache may not show a CA Secret taken a moment ago.
	err := r.Client.Get(ctx, key, &own)
	if apierrors.IsNotFound(err) {
		err = r.reader().Get(ctx, key, &own)
	}
	switch {
	case err == nil:
		// Taken already (or by a reconcile that crashed after writing it): the cluster's own CA
		// Secret is what Steward issues from; the source's Secret may be gone by now.
		ca, _, perr := parseCASecret(&own)
		if perr != nil {
			return adoption.CA{Secret: name, Err: "the cluster's CA Secret " + own.Name + ": " + perr.Error()}, nil, nil
		}
		return describeCA(name, ca), &own, nil
	case !apierrors.IsNotFound(err):
		return adoption.CA{}, nil, err
	}
	var src corev1.Secret
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, &src); apierrors.IsNotFound(err) {
		return adoption.CA{Secret: name, Err: "Secret " + name + " not found in namespace " + ec.Namespace}, nil, nil
	} else if err != nil {
		return adoption.CA{}, nil, err
	}
	ca, why := loadSourceCA(&src)
	if ca == nil {
		return adoption.CA{Secret: name, Err: why}, nil, nil
	}
	// Created, never updated: a CA Secret written meanwhile is the cluster's, read next time.
	written, err := r.createSecret(ctx, ec, resources.CASecretName(ec.Name), func(s *corev1.Secret) error {
		return fillCASecret(s, &tlsplan.CAWrite{Current: ca}, "")
	})
	if err != nil {
		return adoption.CA{}, nil, err
	}
	r.event(ec, corev1.EventTypeNormal, "SourceCATaken", "the source's CA %s (Secret %s) is the cluster's CA: Steward's certificates chain to it",
		ca.Cert.Subject, name)
	return describeCA(name, ca), written, nil
}

// loadSourceCA reads a CA certificate and its key under either pair of keys; nil and why not.
func loadSourceCA(s *corev1.Secret) (*pki.CA, string) {
	for _, k := range sourceCAKeys {
		if len(s.Data[k[0]]) == 0 && len(s.Data[k[1]]) == 0 {
			continue
		}
		ca, err := pki.LoadCA(s.Data[k[0]], s.Data[k[1]])
		if err != nil {
			return nil, "keys " + k[0] + " and " + k[1] + ": " + err.Error()
		}
		return ca, ""
	}
	return nil, "neither tls.crt and tls.key nor ca.crt and ca.key are set"
}

func describeCA(secret string, ca *pki.CA) adoption.CA {
	return adoption.CA{Secret: secret, Subject: ca.Cert.Subject.String(), NotAfter: ca.Cert.NotAfter.UTC().Format(time.RFC3339)}
}
