package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/authplan"
	"github.com/etcd-steward/steward/internal/etcd"
)

// The common names of Steward's own client certificates, which etcd maps to users of that name.
const (
	OperatorCommonName = "steward-operator"
	BackupCommonName   = "steward-backup"
)

// UserSecretName is the Secret holding a declared etcd user's client certificate.
func UserSecretName(cluster, user string) string { return cluster + "-user-" + user }

// autoCompacts: the spec sets etcd's own auto-compaction (with auth on, only root and etcd itself
// can compact).
func autoCompacts(ec *stewardv1.EtcdCluster) bool { return ec.Spec.Options.AutoCompactionMode != "" }

func authIdentity(ec *stewardv1.EtcdCluster) authplan.Identity {
	return authplan.Identity{Operator: OperatorCommonName, Backup: BackupCommonName, SharedClient: ec.Name + "-client"}
}

// authFacts reads what internal/authplan decides from: spec.auth, etcd's auth state, status.auth
// and the password Secrets. A cluster without spec.auth costs nothing: no etcd call is made.
func (r *EtcdClusterReconciler) authFacts(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed) authplan.Facts {
	spec := ec.Spec.Auth
	if spec == nil {
		return authplan.Facts{Self: authIdentity(ec), Etcd: authplan.Observed{Enabled: r.undeclaredAuthOn(ctx, ec, o)}}
	}
	cl := o.client
	f := authplan.Facts{Declared: true, Enabled: spec.Enabled, Self: authIdentity(ec), Revoked: map[string]bool{},
		CRLServed: crlServed(ec, o), AutoCompaction: autoCompacts(ec)}
	for _, role := range spec.Roles {
		out := authplan.Role{Name: role.Name}
		for _, p := range role.Permissions {
			out.Permissions = append(out.Permissions, permissionOf(p))
		}
		f.Roles = append(f.Roles, out)
	}
	st := ec.Status.Auth
	if st == nil {
		st = &stewardv1.AuthStatus{}
	}
	f.ManagedUsers, f.ManagedRoles, f.Passwords = st.ManagedUsers, st.ManagedRoles, st.PasswordDigests
	if len(st.RevokedUsers) > 0 && openSinceRevoke(o) {
		f.OpenSinceRevoke = map[string]bool{}
		for _, name := range st.RevokedUsers {
			f.OpenSinceRevoke[name] = true
		}
	}
	for _, u := range spec.Users {
		user := authplan.User{Name: u.Name, Roles: u.Roles}
		if u.PasswordSecretRef != nil {
			pw, err := r.password(ctx, ec, u)
			switch {
			case err != nil:
				user.PasswordMissing = err.Error()
			case passwordMatches(st.PasswordDigests[u.Name], pw):
				user.PasswordDigest = st.PasswordDigests[u.Name]
			default:
				user.PasswordDigest = "changed"
			}
		}
		f.Users = append(f.Users, user)
	}
	for _, name := range st.ManagedUsers {
		revoked, err := r.certificatesRevoked(ctx, ec, name)
		if err != nil {
			f.Etcd.Err = err
			return f
		}
		f.Revoked[name] = revoked
	}
	if cl == nil {
		f.Etcd.Err = errors.New("no member has an address yet")
		return f
	}
	if err := o.facts.Etcd.MemberListErr; err != "" {
		f.Etcd.Err = noQuorumRead(err)
		return f
	}
	s, err := cl.AuthState(ctx)
	if err != nil {
		f.Etcd.Err, f.Etcd.LockedOut = err, etcd.AuthRefused(err)
		return f
	}
	f.Etcd = authplan.Observed{Enabled: s.Enabled, Roles: map[string][]authplan.Permission{}, Users: s.Users}
	for name, ps := range s.Roles {
		for _, p := range ps {
			f.Etcd.Roles[name] = append(f.Etcd.Roles[name], authplan.Permission{Key: p.Key, RangeEnd: p.RangeEnd, Access: authplan.Access(p.Type)})
		}
		if len(ps) == 0 {
			f.Etcd.Roles[name] = nil
		}
	}
	return f
}

func permissionOf(p stewardv1.AuthPermission) authplan.Permission {
	access := map[stewardv1.AuthAccess]authplan.Access{
		stewardv1.AccessRead: authplan.Read, stewardv1.AccessWrite: authplan.Write, stewardv1.AccessReadWrite: authplan.ReadWrite,
	}[p.Access]
	if p.Prefix != "" {
		return authplan.Permission{Key: p.Prefix, RangeEnd: etcd.PrefixRangeEnd(p.Prefix), Access: access}
	}
	return authplan.Permission{Key: p.Key, Access: access}
}

// password reads a user's password from its Secret. The Secret is the user's own; on the first
// read Steward labels it with the cluster's name, which puts it in the operator's cache (that holds
// only cluster-labelled Secrets) and under its watch: a password changed in it reconciles the
// cluster at once (before, the change waited for the next periodic reconcile, 30 s in the suite),
// and later reads come from the cache, not one GET per password user per reconcile. A Secret
// labelled for another cluster is in the cache too (it holds every Secret with the label's key)
// and is left as it is: its changes reconcile that cluster at once and this one at its next
// reconcile.
func (r *EtcdClusterReconciler) password(ctx context.Context, ec *stewardv1.EtcdCluster, u stewardv1.AuthUser) ([]byte, error) {
	ref := u.PasswordSecretRef
	key := ref.Key
	if key == "" {
		key = "password"
	}
	name := types.NamespacedName{Namespace: ec.Namespace, Name: ref.Name}
	var s corev1.Secret
	if err := r.Client.Get(ctx, name, &s); err != nil {
		if err := r.reader().Get(ctx, name, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("the password Secret %s is not found", ref.Name)
			}
			return nil, err
		}
		if _, labelled := s.Labels[stewardv1.LabelCluster]; !labelled {
			patch := client.MergeFrom(s.DeepCopy())
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels[stewardv1.LabelCluster] = ec.Name
			if err := r.Client.Patch(ctx, &s, patch); err != nil {
				// Only the prompt reaction to a change is lost: the next reconcile reads it again.
				log.FromContext(ctx).Info("labelling the password Secret", "secret", ref.Name, "error", err.Error())
			}
		}
	}
	pw := s.Data[key]
	if len(pw) == 0 {
		return nil, fmt.Errorf("the password Secret %s has no key %q (or it is empty)", ref.Name, key)
	}
	return pw, nil
}

// passwordDigest is what status records of an applied password: a bcrypt hash, as etcd itself
// stores passwords, so a reader of status cannot test guesses cheaply.
func passwordDigest(pw []byte) (string, error) {
	h, err := bcrypt.GenerateFromPassword(pw, bcrypt.DefaultCost)
	return string(h), err
}

// matchedSize bounds the comparisons remembered: one a password user in a steady state, so beyond
// a fleet's password users only churn is forgotten (and paid again, one bcrypt each).
const matchedSize = 4096

// matched remembers bcrypt comparisons already made (by the hash and the password's sha256, in
// memory only), so a settled cluster does not pay a bcrypt per password user every reconcile. Least
// recently used first out: every password change adds an entry, and a map would keep them all.
var matched = lru.New(matchedSize)

func passwordMatches(recorded string, pw []byte) bool {
	if recorded == "" {
		return false
	}
	key := fmt.Sprintf("%s|%x", recorded, sha256.Sum256(pw))
	if v, ok := matched.Get(key); ok {
		return v.(bool)
	}
	ok := bcrypt.CompareHashAndPassword([]byte(recorded), pw) == nil
	matched.Add(key, ok)
	return ok
}

// certificatesRevoked says whether every certificate Steward issued the user that a member may
// still accept is on the recorded revocation list: those status.auth.certificates holds and the
// one its Secret holds now.
func (r *EtcdClusterReconciler) certificatesRevoked(ctx context.Context, ec *stewardv1.EtcdCluster, user string) (bool, error) {
	held, err := r.issuedCertificates(ctx, ec, user)
	if err != nil {
		return false, err
	}
	for _, c := range stillAccepted(held, r.now()) {
		if ec.Status.Auth == nil || !slices.Contains(ec.Status.Auth.RevokedSerials, c.Serial) {
			return false, nil
		}
	}
	return true, nil
}

// issuedCertificates are the certificates the user holds or held (heldCertificates).
func (r *EtcdClusterReconciler) issuedCertificates(ctx context.Context, ec *stewardv1.EtcdCluster, user string) ([]stewardv1.AuthCertificate, error) {
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ec.Namespace, Name: UserSecretName(ec.Name, user)}, &s)
	if apierrors.IsNotFound(err) {
		return heldCertificates(ec.Status.Auth, user, nil), nil
	} else if err != nil {
		return nil, err
	}
	return heldCertificates(ec.Status.Auth, user, &s), nil
}
