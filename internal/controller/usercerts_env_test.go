package controller_test

import (
	"context"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/controller"
	"github.com/etcd-steward/steward/internal/pki"
)

// certSetup is a namespace, a CA, a reconciler whose clock reads *now, and a cluster object
// (never stored: the Secrets name it as their owner by UID).
func certSetup(t *testing.T) (string, *time.Time, *pki.CA, *controller.EtcdClusterReconciler, *stewardv1.EtcdCluster) {
	t.Helper()
	ns := namespace(t)
	now := time.Now()
	ca, err := pki.NewCA("demo", ns, now.Add(-time.Hour), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.EtcdClusterReconciler{Client: env.Client, Clock: func() time.Time { return now }}
	ec := &stewardv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, UID: types.UID("uid-demo")}}
	return ns, &now, ca, r, ec
}

// readCertSecret reads a client certificate Secret and its certificate; nil, nil when missing.
func readCertSecret(t *testing.T, key client.ObjectKey) (*corev1.Secret, *x509.Certificate) {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(context.Background(), key, &s); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertsPEM(s.Data[pki.KeyCert])
	if err != nil {
		t.Fatalf("%s: %v", key.Name, err)
	}
	return &s, certs[0]
}

// appSecret is a shared client Secret as the TLS code writes it: a leaf of ca, trusting bundle.
func appSecret(t *testing.T, ca *pki.CA, now time.Time, bundle ...*pki.CA) *corev1.Secret {
	t.Helper()
	leaf, err := ca.IssueClient("demo-client", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.EncodeKeyPEM(leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for _, b := range bundle {
		certs = append(certs, b.Cert)
	}
	return &corev1.Secret{Data: map[string][]byte{pki.KeyCert: pki.EncodeCertPEM(leaf.Cert), pki.KeyKey: key, pki.KeyCA: pki.EncodeCertPEM(certs...)}}
}

// Users' certificate Secrets: issued only for users etcd has (CN = the user, from the CA that signs
// the shared client's, with its bundle), left alone while current, renewed with the old serial
// kept, never replaced before the current one is recorded, following the shared client to the next
// CA; a removed user's certificates all revoked, and its Secret deleted only once the revocation
// list held them.
func TestUserCertificateSecrets(t *testing.T) {
	ctx := context.Background()
	ns, now, ca, r, ec := certSetup(t)
	ec.Spec.Auth = &stewardv1.AuthSpec{Users: []stewardv1.AuthUser{{Name: "app-a"}, {Name: "app-b"}}}
	ec.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: &metav1.Duration{Duration: 24 * time.Hour}} // renewed after 16 h
	app := appSecret(t, ca, *now, ca)
	round := func(next *pki.CA, app *corev1.Secret, users []string, crlCurrent bool) {
		t.Helper()
		if err := r.UserCertificates(ctx, ec, ca, next, app, users, crlCurrent); err != nil {
			t.Fatal(err)
		}
	}
	read := func(user string) (*corev1.Secret, *x509.Certificate) {
		t.Helper()
		return readCertSecret(t, client.ObjectKey{Namespace: ns, Name: controller.UserSecretName("demo", user)})
	}
	recorded := func() []string {
		var out []string
		for _, c := range ec.Status.Auth.Certificates {
			out = append(out, c.User+"/"+c.Serial)
		}
		return out
	}

	round(nil, app, []string{"app-a"}, false)
	s1, c1 := read("app-a")
	if s1 == nil || c1.Subject.CommonName != "app-a" || c1.CheckSignatureFrom(ca.Cert) != nil || s1.Labels[controller.LabelAuthUser] != "app-a" {
		t.Fatalf("app-a's Secret %v, certificate %v: want CN app-a from the cluster's CA, labelled", s1, c1)
	}
	if bundle, _ := pki.ParseBundle(s1.Data[pki.KeyCA]); len(bundle) != 1 || !bundle[0].Equal(ca.Cert) {
		t.Errorf("app-a's bundle %v: want the shared client's", bundle)
	}
	if s, _ := read("app-b"); s != nil {
		t.Error("app-b got a certificate before etcd has the user")
	}
	serial1 := c1.SerialNumber.Text(16)
	if got := recorded(); !slices.Equal(got, []string{"app-a/" + serial1}) {
		t.Errorf("recorded %v", got)
	}
	round(nil, app, []string{"app-a"}, false)
	if s, _ := read("app-a"); s.ResourceVersion != s1.ResourceVersion {
		t.Error("a current certificate Secret was rewritten")
	}

	// Past the renewal point, but status lost the record (a status write that failed): the
	// current certificate is recorded first, replaced on the next round.
	*now = now.Add(20 * time.Hour)
	ec.Status.Auth.Certificates = nil
	round(nil, app, []string{"app-a"}, false)
	if s, _ := read("app-a"); s.ResourceVersion != s1.ResourceVersion {
		t.Error("a certificate not yet recorded was replaced")
	}
	round(nil, app, []string{"app-a"}, false)
	_, c2 := read("app-a")
	serial2 := c2.SerialNumber.Text(16)
	if serial2 == serial1 || !slices.Equal(recorded(), []string{"app-a/" + serial1, "app-a/" + serial2}) {
		t.Errorf("after renewal: serials %s -> %s, recorded %v; want a new one, both recorded", serial1, serial2, recorded())
	}

	// A CA rotation: the shared client moved to the next CA; users follow it.
	next, err := pki.NewCA("demo", ns, now.Add(-time.Hour), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	round(next, appSecret(t, next, *now, ca, next), []string{"app-a"}, false)
	s3, c3 := read("app-a")
	if c3.CheckSignatureFrom(next.Cert) != nil {
		t.Error("app-a's certificate did not follow the shared client to the next CA")
	}
	if bundle, _ := pki.ParseBundle(s3.Data[pki.KeyCA]); len(bundle) != 2 {
		t.Errorf("app-a's bundle holds %d CAs, want both", len(bundle))
	}

	// app-a removed: every certificate revoked, the Secret kept until the list holds them.
	ec.Spec.Auth.Users = ec.Spec.Auth.Users[1:]
	round(next, app, []string{"app-a"}, true)
	want := []string{serial1, serial2, c3.SerialNumber.Text(16)}
	slices.Sort(want)
	got := slices.Clone(ec.Status.Auth.RevokedSerials)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("revoked %v, want every certificate app-a had %v", got, want)
	}
	if s, _ := read("app-a"); s == nil {
		t.Fatal("app-a's Secret deleted before the revocation list held its serials")
	}
	round(next, app, []string{"app-a"}, false)
	if s, _ := read("app-a"); s == nil {
		t.Fatal("app-a's Secret deleted while the revocation list is behind")
	}
	round(next, app, []string{"app-a"}, true)
	if s, _ := read("app-a"); s != nil {
		t.Error("app-a's Secret outlived its revocation")
	}
	if len(ec.Status.Auth.Certificates) != 0 || len(ec.Status.Auth.RevokedSerials) != 3 || !slices.Equal(ec.Status.Auth.RevokedUsers, []string{"app-a"}) {
		t.Errorf("status after retiring app-a: certificates %v, revoked %v, revoked users %v",
			ec.Status.Auth.Certificates, ec.Status.Auth.RevokedSerials, ec.Status.Auth.RevokedUsers)
	}
	// Still in etcd (not deleted yet), or declared again but not created: the name stays held.
	round(next, app, []string{"app-a"}, true)
	ec.Spec.Auth.Users = append(ec.Spec.Auth.Users, stewardv1.AuthUser{Name: "app-a"})
	round(next, app, nil, true)
	if !slices.Equal(ec.Status.Auth.RevokedUsers, []string{"app-a"}) {
		t.Errorf("revoked users %v: app-a released before etcd had it again", ec.Status.Auth.RevokedUsers)
	}
	round(next, app, []string{"app-a"}, true)
	if len(ec.Status.Auth.RevokedUsers) != 0 {
		t.Errorf("revoked users %v: app-a, created again, still held", ec.Status.Auth.RevokedUsers)
	}
}

// Revoked serials do not pile up for good: a removed user's serials leave status (and with it the
// revocation list) an hour after the last of its certificates expired, and not a moment before; a
// serial revoked with no recorded expiry stays; a Secret's expired certificate is never revoked
// again once pruned.
func TestRevokedSerialsPruned(t *testing.T) {
	ctx := context.Background()
	ns, now, ca, r, ec := certSetup(t)
	ec.Spec.Auth = &stewardv1.AuthSpec{Users: []stewardv1.AuthUser{{Name: "app-a"}, {Name: "app-b"}}}
	ec.Spec.TLS = &stewardv1.TLSSpec{CertificateDuration: &metav1.Duration{Duration: 24 * time.Hour}}
	app := appSecret(t, ca, *now, ca)
	round := func(users []string, crlCurrent bool) {
		t.Helper()
		if err := r.UserCertificates(ctx, ec, ca, nil, app, users, crlCurrent); err != nil {
			t.Fatal(err)
		}
	}
	round([]string{"app-a", "app-b"}, false)
	_, first := readCertSecret(t, client.ObjectKey{Namespace: ns, Name: controller.UserSecretName("demo", "app-a")})
	*now = now.Add(20 * time.Hour) // app-a renewed: two certificates, the first expiring 4 h from here
	round([]string{"app-a", "app-b"}, false)
	round([]string{"app-a", "app-b"}, false)
	ec.Status.Auth.RevokedSerials = append(ec.Status.Auth.RevokedSerials, "abc123") // revoked before expiries were recorded

	ec.Spec.Auth.Users = ec.Spec.Auth.Users[1:] // app-a removed
	round([]string{"app-a"}, true)              // app-b left out of etcd: its certificate is not renewed
	round([]string{"app-a"}, true)
	if s, _ := readCertSecret(t, client.ObjectKey{Namespace: ns, Name: controller.UserSecretName("demo", "app-a")}); s != nil {
		t.Fatal("app-a's Secret outlived its revocation")
	}
	revoked := func() []string {
		out := slices.Clone(ec.Status.Auth.RevokedSerials)
		slices.Sort(out)
		return out
	}
	if got := revoked(); len(got) != 3 || len(ec.Status.Auth.RevokedCertificates) != 2 {
		t.Fatalf("revoked %v with expiries %v: want app-a's two and the old one", got, ec.Status.Auth.RevokedCertificates)
	}

	*now = first.NotAfter.Add(59 * time.Minute) // the first expired, inside the margin: kept
	round([]string{"app-a"}, true)
	if got := revoked(); len(got) != 3 {
		t.Errorf("revoked %v: a serial pruned within an hour of its expiry", got)
	}
	*now = first.NotAfter.Add(61 * time.Minute)
	round([]string{"app-a"}, true)
	if got := revoked(); len(got) != 2 || slices.Contains(got, first.SerialNumber.Text(16)) {
		t.Errorf("revoked %v: want the first certificate's serial %s pruned", got, first.SerialNumber.Text(16))
	}
	*now = now.Add(30 * 24 * time.Hour)
	round([]string{"app-a"}, true)
	if got := revoked(); !slices.Equal(got, []string{"abc123"}) || len(ec.Status.Auth.RevokedCertificates) != 0 {
		t.Errorf("revoked %v, expiries %v: want only the serial without an expiry", got, ec.Status.Auth.RevokedCertificates)
	}

	// app-b removed long after its certificate expired (never renewed): nothing left to revoke.
	ec.Spec.Auth.Users = nil
	round([]string{"app-b"}, true)
	if s, _ := readCertSecret(t, client.ObjectKey{Namespace: ns, Name: controller.UserSecretName("demo", "app-b")}); s != nil {
		t.Error("app-b's Secret kept for a certificate that expired")
	}
	if got := revoked(); !slices.Equal(got, []string{"abc123"}) {
		t.Errorf("revoked %v: an expired certificate was revoked", got)
	}
	if !slices.Contains(ec.Status.Auth.RevokedUsers, "app-b") {
		t.Errorf("revoked users %v: app-b's name not held (a connection opened before its certificate expired stays open)", ec.Status.Auth.RevokedUsers)
	}
}

// The backups' certificate (CN steward-backup, a root user: etcd lets only root take snapshots):
// only with spec.auth, issued like a user's, left alone while current, following a CA rotation.
func TestBackupCertificateSecret(t *testing.T) {
	ctx := context.Background()
	ns, now, ca, r, ec := certSetup(t)
	read := func() (*corev1.Secret, *x509.Certificate) {
		t.Helper()
		return readCertSecret(t, client.ObjectKey{Namespace: ns, Name: "demo-backup-tls"})
	}
	if err := r.BackupCertificate(ctx, ec, ca, nil, appSecret(t, ca, *now, ca)); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(); s != nil {
		t.Fatal("a backups' certificate without spec.auth")
	}
	ec.Spec.Auth = &stewardv1.AuthSpec{}
	if err := r.BackupCertificate(ctx, ec, ca, nil, appSecret(t, ca, *now, ca)); err != nil {
		t.Fatal(err)
	}
	s1, c1 := read()
	if s1 == nil || c1.Subject.CommonName != controller.BackupCommonName || c1.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatalf("the backups' Secret %v, certificate %v", s1, c1)
	}
	if err := r.BackupCertificate(ctx, ec, ca, nil, appSecret(t, ca, *now, ca)); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(); s.ResourceVersion != s1.ResourceVersion {
		t.Error("a current backups' certificate was rewritten")
	}
	next, err := pki.NewCA("demo", ns, now.Add(-time.Hour), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BackupCertificate(ctx, ec, ca, next, appSecret(t, next, *now, ca, next)); err != nil {
		t.Fatal(err)
	}
	if _, c := read(); c.CheckSignatureFrom(next.Cert) != nil {
		t.Error("the backups' certificate did not follow the shared client to the next CA")
	}
}
