package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AuthSpec is etcd authentication: roles with key or prefix permissions, and users who hold them.
// Steward keeps its own access through users it reserves (root, the operator's and the backups'
// certificate names, and <cluster>-client with full access so clients that predate auth keep
// working), enables auth last and never deletes a user or role it did not create (docs/auth.md).
// +kubebuilder:validation:XValidation:rule="!has(self.users) || self.users.all(u, !has(u.roles) || u.roles.all(r, r == 'root' || (has(self.roles) && self.roles.exists(x, x.name == r))))",message="spec.auth.users[].roles: every role must be declared in spec.auth.roles (or be root)"
type AuthSpec struct {
	// enabled turns etcd authentication on; false turns it off again (explicitly: removing
	// spec.auth while auth is on is refused).
	Enabled bool `json:"enabled"`

	// roles are etcd roles Steward creates and keeps in sync. A role that already existed in etcd
	// is kept in sync too, but only roles Steward created are deleted when removed from here.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Roles []AuthRole `json:"roles,omitempty"`

	// users are etcd users. Each gets a Secret <cluster>-user-<name> with a client certificate whose
	// common name is the user; a removed user's certificates are revoked (a CRL every member
	// checks), so they never work again, even if the name comes back.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Users []AuthUser `json:"users,omitempty"`
}

// AuthRole is one etcd role.
type AuthRole struct {
	// name of the role. root and steward-full-access are Steward's own.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`
	// +kubebuilder:validation:XValidation:rule="self != 'root' && self != 'steward-full-access'",message="spec.auth.roles[].name: root and steward-full-access are Steward's own roles"
	Name string `json:"name"`

	// permissions the role grants.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Permissions []AuthPermission `json:"permissions"`
}

// AuthAccess is what a permission allows.
// +kubebuilder:validation:Enum=Read;Write;ReadWrite
type AuthAccess string

// Permission kinds.
const (
	AccessRead      AuthAccess = "Read"
	AccessWrite     AuthAccess = "Write"
	AccessReadWrite AuthAccess = "ReadWrite"
)

// AuthPermission grants access to one key or to every key under a prefix.
// +kubebuilder:validation:XValidation:rule="has(self.key) != has(self.prefix)",message="spec.auth.roles[].permissions[]: set exactly one of key or prefix"
type AuthPermission struct {
	// key is one key.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key,omitempty"`

	// prefix is every key that starts with it (etcdctl role grant-permission --prefix).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`

	// access is Read, Write or ReadWrite.
	Access AuthAccess `json:"access"`
}

// AuthUser is one etcd user.
type AuthUser struct {
	// name of the user and the common name of its certificate. root, steward-operator,
	// steward-backup and <cluster>-client are Steward's own.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`
	// +kubebuilder:validation:XValidation:rule="self != 'root' && self != 'steward-operator' && self != 'steward-backup'",message="spec.auth.users[].name: root, steward-operator and steward-backup are Steward's own users"
	Name string `json:"name"`

	// roles the user holds (declared in spec.auth.roles, or root).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=64
	Roles []string `json:"roles,omitempty"`

	// passwordSecretRef, when set, also gives the user a password (etcd's simple or JWT tokens).
	// Changing the Secret changes the password, which ends the user's tokens at once: rotate
	// without a gap by moving clients to a second user first (docs/auth.md).
	// +optional
	PasswordSecretRef *PasswordSecretRef `json:"passwordSecretRef,omitempty"`
}

// PasswordSecretRef names a key of a Secret in the cluster's namespace.
type PasswordSecretRef struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// key in the Secret (default password).
	// +optional
	// +kubebuilder:default=password
	Key string `json:"key,omitempty"`
}

// AuthPhase is where a cluster is between auth off and auth on.
type AuthPhase string

// AuthStatus is what Steward last did about etcd authentication.
type AuthStatus struct {
	// phase is Off, Enabling, On, Syncing, Disabling, Refused or Unknown; Undeclared when etcd
	// has authentication on while spec.auth is not declared (a backup taken with auth on restored,
	// or auth turned on by hand): Steward changes nothing about it, and says so here.
	// +optional
	Phase AuthPhase `json:"phase,omitempty"`
	// message says what Steward waits for or why it refuses; with auth on and nothing left to do,
	// it says so when etcd's auto-compaction is not set (etcd lets only root compact).
	// +optional
	Message string `json:"message,omitempty"`
	// users are the declared users' states.
	// +optional
	// +listType=map
	// +listMapKey=name
	Users []AuthUserStatus `json:"users,omitempty"`
	// managedUsers and managedRoles are what Steward created (written before each create); only
	// these are deleted when removed from the spec.
	// +optional
	ManagedUsers []string `json:"managedUsers,omitempty"`
	// +optional
	ManagedRoles []string `json:"managedRoles,omitempty"`
	// passwordDigests identify the password applied to each user (a digest, never the password).
	// +optional
	PasswordDigests map[string]string `json:"passwordDigests,omitempty"`
	// revokedSerials are the serial numbers (hex) of every certificate revoked with its user;
	// the revocation list members check holds them all.
	// +optional
	RevokedSerials []string `json:"revokedSerials,omitempty"`
	// revokedCertificates are the revoked certificates with their expiry: a serial leaves
	// revokedSerials and the revocation list an hour after its certificate expired (no member
	// accepts it then, even one whose clock runs behind), so the list does not grow for good.
	// A serial revoked without a recorded expiry stays.
	// +optional
	RevokedCertificates []AuthCertificate `json:"revokedCertificates,omitempty"`
	// revokedUsers are users whose certificates were revoked. Such a name is created in etcd again
	// only once every member's Pod was created after the revocation list that holds them: etcd
	// checks the list only when a connection opens, so a connection opened before would speak as
	// the new user.
	// +optional
	RevokedUsers []string `json:"revokedUsers,omitempty"`
	// certificates are the client certificates Steward issued users that have not expired: all of
	// a user's are revoked when it is removed, not only the one its Secret holds now (a client may
	// keep a renewed-away copy). A certificate is recorded here before one replaces it.
	// +optional
	Certificates []AuthCertificate `json:"certificates,omitempty"`
}

// AuthCertificate is one client certificate issued to a user.
type AuthCertificate struct {
	User string `json:"user"`
	// serial number, hex.
	Serial   string      `json:"serial"`
	NotAfter metav1.Time `json:"notAfter"`
}

// AuthUserStatus is one user's state.
type AuthUserStatus struct {
	Name string `json:"name"`
	// state is Ready, Pending or WaitingForPassword.
	State string `json:"state"`
	// +optional
	Message string `json:"message,omitempty"`
}
