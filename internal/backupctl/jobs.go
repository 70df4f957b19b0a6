package backupctl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/resources"
)

// Source picks the member to stream from: a ready follower (the highest ordinal, the one a roll
// reaches first, is fine: a snapshot does not disrupt it), the leader only when it is alone.
func Source(ec *stewardv1.EtcdCluster) (string, bool) {
	members := slices.Clone(ec.Status.Members)
	slices.SortFunc(members, func(a, b stewardv1.MemberStatus) int { return strings.Compare(b.Name, a.Name) })
	for _, m := range members {
		if m.Ready && m.Role == stewardv1.RoleFollower {
			return m.Name, true
		}
	}
	if len(members) == 1 && members[0].Ready && members[0].Role == stewardv1.RoleLeader {
		return members[0].Name, true
	}
	return "", false
}

// JobClientSecret is the Secret whose client certificate a backup Job, drill or streamer presents:
// with etcd auth declared, the backups' own (CN steward-backup, root: etcd lets only root take a
// snapshot) once the operator has written it; before that, and without auth, ClientSecretName's.
// Before auth goes on the shared client's certificate may still do everything; the backups' is
// written as soon as spec.auth is declared, before the operator enables it.
func JobClientSecret(ctx context.Context, c client.Reader, ec *stewardv1.EtcdCluster) (string, error) {
	if resources.ServesCRL(ec) {
		name := resources.BackupTLSSecretName(ec.Name)
		err := c.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: name}, &corev1.Secret{})
		if err == nil {
			return name, nil
		} else if !apierrors.IsNotFound(err) {
			return "", err
		}
	}
	return ClientSecretName(ec), nil
}

// ClientSecretName is the Secret whose client certificate a Job presents without etcd auth:
// Steward's application client Secret, or the user's client-plane Secret with source Secret.
func ClientSecretName(ec *stewardv1.EtcdCluster) string {
	if t := ec.Spec.TLS; t != nil && t.Client.Source == stewardv1.TLSSourceSecret && t.Client.SecretName != "" {
		return t.Client.SecretName
	}
	return resources.ClientTLSSecretName(ec.Name)
}

// outcome is what a Job came to.
type outcome struct {
	missing bool
	done    bool
	// message is the succeeded container's termination message (its JSON result).
	message string
	// failed says why the Job cannot succeed.
	failed string
}

// startFailures are container states that never resolve by waiting: a missing Secret or key, an
// image that cannot be pulled.
var startFailures = []string{"CreateContainerConfigError", "CreateContainerError", "ErrImagePull",
	"ImagePullBackOff", "InvalidImageName"}

func (r *BackupReconciler) jobOutcome(ctx context.Context, ns, name string) (outcome, error) {
	return readJob(ctx, r.Client, r.APIReader, ns, name)
}

// readJob reads a Job's outcome: cached reads first, live ones (live) for its Pods and to tell a
// Job just created from one that is gone.
func readJob(ctx context.Context, cached client.Client, live client.Reader, ns, name string) (outcome, error) {
	var job batchv1.Job
	key := client.ObjectKey{Namespace: ns, Name: name}
	err := cached.Get(ctx, key, &job)
	if apierrors.IsNotFound(err) {
		// The cache may not have seen a Job created a moment ago: only the API server can say
		// it is gone.
		err = live.Get(ctx, key, &job)
	}
	if apierrors.IsNotFound(err) {
		return outcome{missing: true}, nil
	} else if err != nil {
		return outcome{}, err
	}
	var pods corev1.PodList
	if err := live.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
		return outcome{}, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			for _, p := range pods.Items {
				if msg, ok := terminated(p, 0); ok {
					return outcome{done: true, message: msg}, nil
				}
			}
			return outcome{done: true}, nil
		case batchv1.JobFailed:
			why := c.Reason + ": " + c.Message
			for _, p := range pods.Items {
				// A Pod that left no message (killed before writing any) keeps the Job's reason:
				// an empty reason would read as "still running", forever.
				if msg, ok := terminated(p, 1); ok && strings.TrimSpace(msg) != "" {
					why = resultError(msg)
					break
				}
			}
			return outcome{failed: why}, nil
		}
	}
	for _, p := range pods.Items {
		for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			if w := s.State.Waiting; w != nil && slices.Contains(startFailures, w.Reason) {
				_ = cached.Delete(ctx, &job, client.PropagationPolicy("Background"))
				return outcome{failed: fmt.Sprintf("the %s Pod cannot start: %s: %s", job.Labels[stewardv1.LabelBackupTask], w.Reason, w.Message)}, nil
			}
		}
	}
	return outcome{}, nil
}

// terminated returns the main container's termination message when it exited with (code != 0)
// matching want (0 = success, 1 = failure).
func terminated(p corev1.Pod, want int) (string, bool) {
	for _, s := range p.Status.ContainerStatuses {
		t := s.State.Terminated
		if t == nil {
			continue
		}
		if (t.ExitCode == 0) == (want == 0) {
			return t.Message, true
		}
	}
	return "", false
}

// result is the JSON line the snapshot subcommands write to the termination log.
type result struct {
	Error  string `json:"error,omitempty"`
	Member struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"member"`
	ClusterID   string `json:"clusterID,omitempty"`
	EtcdVersion string `json:"etcdVersion,omitempty"`
	Revision    int64  `json:"revision,omitempty"`
	Size        int64  `json:"size,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	Compression string `json:"compression,omitempty"`
	Location    string `json:"location,omitempty"`
	Key         string `json:"key,omitempty"`
	// The restore drill's fields (targetRevision: the chain drill's).
	Verified        bool    `json:"verified,omitempty"`
	TargetRevision  int64   `json:"targetRevision,omitempty"`
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	Message         string  `json:"message,omitempty"`
}

func parseResult(msg string) (result, error) {
	var res result
	line := strings.TrimSpace(msg)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	if line == "" {
		return res, fmt.Errorf("the termination message is empty")
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return res, fmt.Errorf("%w (message %q)", err, truncate(line, 200))
	}
	if res.Error != "" {
		return res, fmt.Errorf("%s", res.Error)
	}
	return res, nil
}

// resultError is the failure a Pod reported, or its last log lines.
func resultError(msg string) string {
	var res result
	line := strings.TrimSpace(msg)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	if json.Unmarshal([]byte(line), &res) == nil {
		if res.Error != "" {
			return res.Error
		}
		if res.Message != "" {
			return res.Message
		}
	}
	return truncate(strings.TrimSpace(msg), 500)
}

func (res result) fill(s *stewardv1.EtcdBackupStatus) {
	if res.Member.Name != "" {
		s.Member = res.Member.Name
	}
	s.ClusterID, s.EtcdVersion, s.Revision = res.ClusterID, res.EtcdVersion, res.Revision
	s.Size, s.SHA256 = res.Size, res.SHA256
	if res.Compression != "" {
		s.Compression = stewardv1.BackupCompression(res.Compression)
	}
	if res.Key != "" {
		s.Key = res.Key
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
