package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/authplan"
	"github.com/etcd-steward/steward/internal/etcd"
)

// authenticate carries out one etcd authentication step. Records change status.auth only (the
// status write after apply lands them before the next step acts); etcd steps are idempotent, and
// a password applied is recorded by its digest in the same status write.
func (r *EtcdClusterReconciler) authenticate(ctx context.Context, ec *stewardv1.EtcdCluster, o *observed, s authplan.Step) error {
	st := ec.Status.Auth
	if st == nil {
		st = &stewardv1.AuthStatus{}
		ec.Status.Auth = st
	}
	switch s.Kind {
	case authplan.Record:
		st.ManagedUsers, st.ManagedRoles = slices.Clone(s.ManagedUsers), slices.Clone(s.ManagedRoles)
		if !slices.Contains(s.ManagedUsers, s.User) {
			delete(st.PasswordDigests, s.User) // forgotten: a user of that name later starts afresh
		}
		return nil
	case authplan.RevokeCertificates:
		held, err := r.issuedCertificates(ctx, ec, s.User)
		if err != nil {
			return err
		}
		revoke(st, s.User, held, r.now())
		return nil
	}
	cl := o.client
	if cl == nil {
		return errors.New("no etcd client for the authentication step")
	}
	switch s.Kind {
	case authplan.RoleAdd:
		return cl.RoleAdd(ctx, s.Role)
	case authplan.RoleGrant:
		return cl.RoleGrant(ctx, s.Role, etcdPermission(s.Permission))
	case authplan.RoleRevoke:
		return cl.RoleRevoke(ctx, s.Role, s.Permission.Key, s.Permission.RangeEnd)
	case authplan.RoleDelete:
		return cl.RoleDelete(ctx, s.Role)
	case authplan.UserAdd, authplan.UserPassword:
		return r.setUser(ctx, ec, cl, st, s)
	case authplan.UserGrant:
		return cl.UserGrantRole(ctx, s.User, s.Role)
	case authplan.UserRevoke:
		return cl.UserRevokeRole(ctx, s.User, s.Role)
	case authplan.UserDelete:
		return cl.UserDelete(ctx, s.User)
	case authplan.AuthEnable:
		return cl.AuthEnable(ctx)
	case authplan.AuthDisable:
		return cl.AuthDisable(ctx)
	}
	return fmt.Errorf("authentication step %s has no implementation", s.Kind)
}

// setUser adds a user (with its password, if it has one) or changes its password, and records
// the password's digest.
func (r *EtcdClusterReconciler) setUser(ctx context.Context, ec *stewardv1.EtcdCluster, cl *etcd.Client, st *stewardv1.AuthStatus, s authplan.Step) error {
	var pw []byte
	if s.Kind == authplan.UserPassword || s.WithPassword {
		i := slices.IndexFunc(ec.Spec.Auth.Users, func(u stewardv1.AuthUser) bool { return u.Name == s.User })
		if i < 0 || ec.Spec.Auth.Users[i].PasswordSecretRef == nil {
			return fmt.Errorf("user %s has no password Secret", s.User)
		}
		var err error
		if pw, err = r.password(ctx, ec, ec.Spec.Auth.Users[i]); err != nil {
			return err
		}
	}
	var err error
	if s.Kind == authplan.UserAdd {
		err = cl.UserAdd(ctx, s.User, string(pw))
	} else {
		err = cl.UserChangePassword(ctx, s.User, string(pw))
	}
	if err != nil || pw == nil {
		return err
	}
	d, err := passwordDigest(pw)
	if err != nil {
		return err
	}
	if st.PasswordDigests == nil {
		st.PasswordDigests = map[string]string{}
	}
	st.PasswordDigests[s.User] = d
	return nil
}

func etcdPermission(p authplan.Permission) etcd.AuthPermission {
	return etcd.AuthPermission{Key: p.Key, RangeEnd: p.RangeEnd, Type: string(p.Access)}
}

// setAuthStatus writes status.auth's phase, message and users from this reconcile's facts and
// step. A cluster without spec.auth has no status.auth, unless etcd has auth on all the same
// (phase Undeclared, saying what that means).
func setAuthStatus(ec *stewardv1.EtcdCluster, f authplan.Facts, s authplan.Step) {
	if !f.Declared {
		ec.Status.Auth = nil
		if f.Etcd.Enabled {
			ec.Status.Auth = &stewardv1.AuthStatus{Phase: stewardv1.AuthPhase(authplan.Undeclared), Message: authplan.Message(f, s)}
		}
		return
	}
	if ec.Status.Auth == nil {
		ec.Status.Auth = &stewardv1.AuthStatus{}
	}
	st := ec.Status.Auth
	st.Phase = stewardv1.AuthPhase(authplan.PhaseOf(f, s))
	st.Message = authplan.Message(f, s)
	st.Users = nil
	for _, u := range authplan.Users(f) {
		st.Users = append(st.Users, stewardv1.AuthUserStatus{Name: u.Name, State: u.State, Message: u.Message})
	}
}
