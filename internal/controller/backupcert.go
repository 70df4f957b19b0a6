package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
	"github.com/etcd-steward/steward/internal/tlsplan"
)

// backupCertificate keeps the backups' client certificate Secret (resources.BackupTLSSecretName, CN
// steward-backup) for a cluster with spec.auth: etcd lets only root take a snapshot, and the
// shared client's user has every key but not root. Backup Jobs, drills and the streamer present it
// (internal/backupctl) once it exists; it is issued like a user's, following the shared client's
// CA and bundle, and is never revoked (the user is Steward's own and outlives every spec change).
func (r *EtcdClusterReconciler) backupCertificate(ctx context.Context, ec *stewardv1.EtcdCluster, t *tlsObserved) error {
	if !resources.ServesCRL(ec) || t == nil {
		return nil
	}
	issuer, bundle := userIssuer(t)
	if issuer == nil {
		return nil
	}
	name := resources.BackupTLSSecretName(ec.Name)
	var cur *corev1.Secret
	var s corev1.Secret
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, &s); {
	case err == nil:
		cur = &s
	case !apierrors.IsNotFound(err):
		return err
	}
	now := r.now()
	leafLife, _, fraction, _ := tlsSettings(ec)
	leaf, reissue, rebundle := clientLeafState(cur, issuer, bundle, now, fraction)
	if !reissue && !rebundle {
		return nil
	}
	if reissue {
		var err error
		if leaf, err = issuer.IssueClient(BackupCommonName, now, leafLife); err != nil {
			return err
		}
	}
	return r.writeSecret(ctx, ec, name, ec, func(s *corev1.Secret) error {
		return fillClientSecret(s, &tlsplan.Material{Leaf: leaf, Trust: bundle})
	})
}
