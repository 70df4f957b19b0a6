package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TLSSource is where a plane's certificates come from.
// +kubebuilder:validation:Enum=Operator;Secret;CertManager
type TLSSource string

const (
	// TLSSourceOperator: Steward runs a CA per cluster and issues, renews and rotates everything.
	TLSSourceOperator TLSSource = "Operator"
	// TLSSourceSecret: the user provides a Secret with tls.crt, tls.key and ca.crt; Steward
	// validates it, copies it onto the members when it changes, and rotates the CA in passes when
	// ca.crt changes.
	TLSSourceSecret TLSSource = "Secret"
	// TLSSourceCertManager: Steward asks cert-manager for the certificates (Certificates signed
	// by issuerRef) and then treats the Secrets cert-manager writes as with source Secret.
	TLSSourceCertManager TLSSource = "CertManager"
)

// TLSSpec is mutual TLS on etcd's peer and client planes. On by default.
// +kubebuilder:validation:XValidation:rule="!has(self.peer) || !has(self.client) || !has(self.peer.source) || !has(self.client.source) || self.peer.source == self.client.source",message="spec.tls.peer.source and spec.tls.client.source must be the same: mixing sources is not supported yet"
// +kubebuilder:validation:XValidation:rule="!has(self.rotateCA) || !has(self.peer) || !has(self.peer.source) || self.peer.source == 'Operator'",message="spec.tls.rotateCA rotates the CA Steward runs (source Operator); with source Secret or CertManager, a new CA in the Secrets' ca.crt is rotated in passes"
// +kubebuilder:validation:XValidation:rule="!has(self.caDuration) || !has(self.certificateDuration) || duration(self.caDuration) - duration(self.certificateDuration) >= duration(self.certificateDuration)",message="spec.tls.caDuration must be at least twice spec.tls.certificateDuration, so leaves can be renewed under one CA"
// +kubebuilder:validation:XValidation:rule="(has(self.peer) && has(self.peer.source) && self.peer.source != 'Operator') || !has(self.caDuration) || !has(self.dropOldCAAfter) || !has(self.renewBeforePercentage) || duration(self.caDuration).getSeconds() * self.renewBeforePercentage >= duration(self.dropOldCAAfter).getSeconds() * 200",message="spec.tls.caDuration × renewBeforePercentage must be at least twice spec.tls.dropOldCAAfter: a rotation starts when that share of the CA's life is left, and the old CA must outlive the wait for clients"
// +kubebuilder:validation:XValidation:rule="!has(self.client) || !has(self.client.enabled) || self.client.enabled",message="spec.tls.client.enabled cannot be false: plaintext clients mean spec.tls.enabled false (both planes); only the peer plane can run plaintext alone"
// +kubebuilder:validation:XValidation:rule="!has(self.peer) || !has(self.peer.enabled) || self.peer.enabled || !has(self.peer.source) || self.peer.source == 'Operator'",message="spec.tls.peer.enabled false (plaintext peers, TLS clients) is supported with source Operator only"
type TLSSpec struct {
	// enabled turns mutual TLS on for both planes. It is fixed when the cluster is created.
	// +optional
	// +kubebuilder:default=true
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.tls.enabled is fixed at creation: switching between plaintext and TLS changes every member's peer URL; create a new cluster and move the data"
	Enabled *bool `json:"enabled,omitempty"`

	// clusterDomain is the Kubernetes DNS suffix put in member certificates.
	// +optional
	// +kubebuilder:default="cluster.local"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.tls.clusterDomain is fixed at creation"
	ClusterDomain string `json:"clusterDomain,omitempty"`

	// certificateDuration is the lifetime of the leaf certificates Steward issues (members, its own
	// client, the application client Secret). Leaves are renewed without restarts.
	// +optional
	// +kubebuilder:default="2160h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.tls.certificateDuration must be at least 1m"
	CertificateDuration *metav1.Duration `json:"certificateDuration,omitempty"`

	// caDuration is the lifetime of the CA Steward creates. Steward rotates the CA in passes before
	// it expires.
	// +optional
	// +kubebuilder:default="43800h"
	CADuration *metav1.Duration `json:"caDuration,omitempty"`

	// renewBeforePercentage: a certificate is renewed (a CA rotated) when this share of its lifetime
	// is left. The default renews at two thirds of the lifetime.
	// +optional
	// +kubebuilder:default=33
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=90
	RenewBeforePercentage *int32 `json:"renewBeforePercentage,omitempty"`

	// rotateCA: set it to a new value (a date, a ticket number) to rotate the Operator CA now.
	// status.tls.rotateCA shows the last value acted on.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	RotateCA string `json:"rotateCA,omitempty"`

	// dropOldCAAfter: during a CA rotation (any source), how long members keep trusting the old
	// CA on the client plane after the clients' new certificate was issued, unless
	// approveDropOldCA says so sooner. Clients that load their certificates once (a
	// kube-apiserver's --etcd-cafile, --etcd-certfile, --etcd-keyfile) present an old-signed
	// certificate until they restart; restart them within this time. At least 90s.
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('90s')",message="spec.tls.dropOldCAAfter must be at least 90s: applications that reload the client Secret need that long to load it"
	DropOldCAAfter *metav1.Duration `json:"dropOldCAAfter,omitempty"`

	// approveDropOldCA: once clients that load certificates once have restarted on the new
	// ca.crt and client certificate, set it to status.tls.dropOldCA.approval to drop the old CA
	// now. The value names one rotation, so a value left here approves no later one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ApproveDropOldCA string `json:"approveDropOldCA,omitempty"`

	// peer is the members' plane among themselves.
	// +optional
	// +kubebuilder:default={}
	Peer TLSPlane `json:"peer"`

	// client is the plane applications and Steward use.
	// +optional
	// +kubebuilder:default={}
	Client TLSPlane `json:"client"`
}

// TLSPlane says where one plane's material comes from.
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.source != 'Secret' || has(self.secretName)",message="secretName is required with source Secret"
// +kubebuilder:validation:XValidation:rule="(has(self.source) && self.source == 'Secret') || !has(self.secretName)",message="secretName is only used with source Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.source != 'CertManager' || has(self.issuerRef)",message="issuerRef is required with source CertManager"
// +kubebuilder:validation:XValidation:rule="(has(self.source) && self.source == 'CertManager') || !has(self.issuerRef)",message="issuerRef is only used with source CertManager"
type TLSPlane struct {
	// enabled (peer plane only) set to false runs the members' peer plane in plaintext while
	// clients keep mutual TLS: what a source adopted with TLS clients and plaintext peers runs
	// (spec.bootstrap.join), whose peer URLs are http://. Fixed at creation; with source Operator.
	// +optional
	// +kubebuilder:default=true
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.tls.peer.enabled is fixed at creation: it sets every member's peer URL"
	Enabled *bool `json:"enabled,omitempty"`
	// source: Operator (default), Secret or CertManager. Fixed at creation.
	// +optional
	// +kubebuilder:default=Operator
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the TLS source is fixed at creation"
	Source TLSSource `json:"source,omitempty"`

	// secretName (source Secret) names a Secret in the cluster's namespace with tls.crt, tls.key and
	// ca.crt. One certificate serves every member, so it must cover
	// <member>.<cluster>.<namespace>.svc for each (a wildcard *.<cluster>.<namespace>.svc will
	// do) and, on the client plane, <cluster>-client.<namespace>.svc; it needs both the server
	// auth and client auth usages (members dial each other, and Steward presents the client
	// plane's certificate as its own). Steward checks the Secret every few seconds: a new
	// certificate is rolled onto members without restarts, a changed ca.crt in three passes.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// issuerRef (source CertManager) is the cert-manager Issuer or ClusterIssuer that signs this
	// plane's certificates. Its Secrets must carry ca.crt (CA and self-signed issuers do).
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`
}

// IssuerRef names a cert-manager issuer.
type IssuerRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// kind is Issuer (in the cluster's namespace) or ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`
	// group of the issuer kind.
	// +optional
	// +kubebuilder:default=cert-manager.io
	Group string `json:"group,omitempty"`
}

// TLSStatus is what the cluster's certificates are doing.
type TLSStatus struct {
	// caNotAfter is when the current CA expires (Operator source).
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// rotation is the CA rotation pass in progress: WidenTrust, SwapLeaves or DropOldCA.
	// +optional
	Rotation string `json:"rotation,omitempty"`
	// rotateCA is the last spec.tls.rotateCA value a rotation was started for.
	// +optional
	RotateCA string `json:"rotateCA,omitempty"`
	// dropOldCA is set while a CA rotation waits, before members stop trusting the old CA on the
	// client plane, for clients that load their certificates once to restart.
	// +optional
	DropOldCA *DropOldCAStatus `json:"dropOldCA,omitempty"`
	// certificates lists each certificate Steward tracks, with its expiry.
	// +optional
	// +listType=map
	// +listMapKey=name
	Certificates []CertificateStatus `json:"certificates,omitempty"`
}

// DropOldCAStatus says what a CA rotation waits for before dropping the old CA.
type DropOldCAStatus struct {
	// approval is the value to set spec.tls.approveDropOldCA to once those clients restarted.
	Approval string `json:"approval"`
	// after is when the old CA is dropped without approval.
	After metav1.Time `json:"after"`
	// message says what to do.
	Message string `json:"message"`
}

// CertificateStatus is one certificate's expiry.
type CertificateStatus struct {
	// name says which certificate: <member>/server, <member>/peer, client, ca.
	Name string `json:"name"`
	// notAfter is when it expires.
	NotAfter metav1.Time `json:"notAfter"`
	// renewAt is when Steward renews it (absent for certificates Steward cannot renew).
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
	// served is true once the member was seen presenting this certificate.
	// +optional
	Served bool `json:"served,omitempty"`
}

// TLSEnabled says whether the cluster runs mutual TLS (the default) on its client plane, and on
// its peer plane unless PeerTLSEnabled says otherwise.
func (ec *EtcdCluster) TLSEnabled() bool {
	return ec.Spec.TLS == nil || ec.Spec.TLS.Enabled == nil || *ec.Spec.TLS.Enabled
}

// PeerTLSEnabled says whether the members' peer plane runs mutual TLS: with TLS on, unless
// spec.tls.peer.enabled is false.
func (ec *EtcdCluster) PeerTLSEnabled() bool {
	return ec.TLSEnabled() && (ec.Spec.TLS == nil || ec.Spec.TLS.Peer.Enabled == nil || *ec.Spec.TLS.Peer.Enabled)
}
