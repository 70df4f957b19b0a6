package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

// LogLevel is etcd's --log-level.
// +kubebuilder:validation:Enum=debug;info;warn;error;panic;fatal
type LogLevel string

// EtcdOptions are etcd settings. Unset fields keep etcd's own defaults.
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeoutMillis) ? self.electionTimeoutMillis : 1000) >= 5 * (has(self.heartbeatIntervalMillis) ? self.heartbeatIntervalMillis : 100)",message="spec.options.electionTimeoutMillis must be at least 5 times spec.options.heartbeatIntervalMillis (etcd defaults: 1000 and 100)"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || has(self.autoCompactionMode)",message="spec.options.autoCompactionRetention needs spec.options.autoCompactionMode (periodic or revision)"
type EtcdOptions struct {
	// quotaBackendBytes is the backend size quota (--quota-backend-bytes); etcd's default is 2Gi.
	// Keep it below spec.storage.size.
	// +optional
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`

	// autoCompactionMode is periodic or revision (--auto-compaction-mode).
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`

	// autoCompactionRetention is a duration such as 1h for periodic mode, or a revision count for
	// revision mode (--auto-compaction-retention).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`

	// snapshotCount is the number of committed transactions that trigger a snapshot to disk
	// (--snapshot-count).
	// +optional
	// +kubebuilder:validation:Minimum=1
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`

	// heartbeatIntervalMillis is the Raft heartbeat interval in milliseconds (--heartbeat-interval).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	HeartbeatIntervalMillis *int32 `json:"heartbeatIntervalMillis,omitempty"`

	// electionTimeoutMillis is the Raft election timeout in milliseconds (--election-timeout); at
	// least 5 times the heartbeat interval.
	// +optional
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=50000
	ElectionTimeoutMillis *int32 `json:"electionTimeoutMillis,omitempty"`

	// maxRequestBytes is the largest client request etcd accepts (--max-request-bytes).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxRequestBytes *int32 `json:"maxRequestBytes,omitempty"`

	// logLevel is etcd's log level (--log-level).
	// +optional
	LogLevel LogLevel `json:"logLevel,omitempty"`

	// extraArgs passes other etcd flags, keyed by flag name without leading dashes (for example
	// "experimental-compact-hash-check-enabled": "true"). Flags that Steward sets itself (identity,
	// URLs, cluster bootstrap, data directory, TLS and the peer-port restriction) and flags with a
	// typed field above are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9.-]*$') && size(k) <= 128)",message="spec.options.extraArgs keys must be etcd flag names without leading dashes, in lower case, such as log-outputs"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['name','data-dir','wal-dir','initial-cluster','initial-cluster-state','initial-cluster-token','initial-advertise-peer-urls','advertise-client-urls','listen-client-urls','listen-client-http-urls','listen-peer-urls','listen-metrics-urls','cert-file','key-file','trusted-ca-file','client-cert-auth','client-crl-file','auto-tls','peer-cert-file','peer-key-file','peer-trusted-ca-file','peer-client-cert-auth','peer-auto-tls','peer-cert-allowed-hostname','peer-cert-allowed-cn','peer-skip-client-san-verification','experimental-peer-skip-client-san-verification','discovery','discovery-srv','discovery-token','discovery-endpoints','force-new-cluster','config-file','corrupt-check-time','experimental-corrupt-check-time','experimental-initial-corrupt-check']))",message="spec.options.extraArgs cannot set flags Steward owns: name, data-dir, wal-dir, initial-cluster*, listen-* and advertise-* URLs, TLS files (cert-file, key-file, trusted-ca-file, client-cert-auth, auto-tls and their peer- forms), client-crl-file (the revocation list of spec.auth), the peer-port restriction (peer-cert-allowed-hostname, peer-cert-allowed-cn, [experimental-]peer-skip-client-san-verification), discovery*, force-new-cluster, config-file, the corruption checks ([experimental-]corrupt-check-time, experimental-initial-corrupt-check)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['quota-backend-bytes','auto-compaction-mode','auto-compaction-retention','snapshot-count','heartbeat-interval','election-timeout','max-request-bytes','log-level']))",message="spec.options.extraArgs cannot set a flag that has a typed field: use spec.options (quotaBackendBytes, autoCompactionMode, autoCompactionRetention, snapshotCount, heartbeatIntervalMillis, electionTimeoutMillis, maxRequestBytes, logLevel)"
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
}

// OwnedFlags are the etcd flags Steward derives from the cluster and member identity; extraArgs may
// not set them, since etcd takes a flag's last occurrence and extraArgs come last. It holds every
// flag resources.Args emits in any configuration (internal/resources proves it against a real
// apiserver), plus flags that would undo one of them (wal-dir, auto-tls, peer-cert-allowed-cn,
// discovery*, force-new-cluster, config-file). feature-gates is not owned: Steward merges its
// InitialCorruptCheck gate into the user's value. The CRD's CEL rule carries the same list;
// flags_test.go keeps the two equal.
var OwnedFlags = []string{
	"name", "data-dir", "wal-dir", "initial-cluster", "initial-cluster-state", "initial-cluster-token",
	"initial-advertise-peer-urls", "advertise-client-urls", "listen-client-urls",
	"listen-client-http-urls", "listen-peer-urls", "listen-metrics-urls", "cert-file", "key-file",
	"trusted-ca-file", "client-cert-auth", "client-crl-file", "auto-tls", "peer-cert-file", "peer-key-file",
	"peer-trusted-ca-file", "peer-client-cert-auth", "peer-auto-tls",
	"peer-cert-allowed-hostname", "peer-cert-allowed-cn", "peer-skip-client-san-verification",
	"experimental-peer-skip-client-san-verification", "discovery", "discovery-srv",
	"discovery-token", "discovery-endpoints", "force-new-cluster", "config-file",
	"corrupt-check-time", "experimental-corrupt-check-time", "experimental-initial-corrupt-check",
}

// TypedFlags are the etcd flags with a typed field in EtcdOptions; extraArgs may not set them.
var TypedFlags = []string{
	"quota-backend-bytes", "auto-compaction-mode", "auto-compaction-retention", "snapshot-count",
	"heartbeat-interval", "election-timeout", "max-request-bytes", "log-level",
}
