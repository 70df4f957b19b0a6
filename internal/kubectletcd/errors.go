package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

const group = "etcd.steward.dev"

// apiError turns the API server's answer into a sentence naming what the user lacks: "forbidden"
// alone does not tell anyone which Role to fix.
func apiError(err error, verb, resource, ns, name string) error {
	if err == nil {
		return nil
	}
	kind := resource
	if g := groupOf(resource); g != "" {
		kind = resource + "." + g
	}
	where := fmt.Sprintf("in namespace %q", ns)
	if ns == "" {
		where = "at cluster scope"
	}
	switch {
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %q not found in namespace %q", singular(resource), name, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden: you cannot %s %s %s (ask for RBAC verb %q on resource %q): %w",
			verb, kind, where, verb, kind, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized: the cluster did not accept your credentials: %w", err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, kind, where, err)
}

func groupOf(resource string) string {
	if slices.Contains([]string{"etcdclusters", "etcdmembers", "etcdbackups", "etcdbackupschedules"}, resource) {
		return group
	}
	return ""
}

func singular(resource string) string {
	if len(resource) > 1 && resource[len(resource)-1] == 's' {
		return resource[:len(resource)-1]
	}
	return resource
}

func getCluster(ctx context.Context, env *Env, name string) (*stewardv1.EtcdCluster, error) {
	ec := &stewardv1.EtcdCluster{}
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: name}, ec)
	return ec, apiError(err, "get", "etcdclusters", env.Namespace, name)
}

func listMembers(ctx context.Context, env *Env, cluster string) ([]stewardv1.EtcdMember, error) {
	var l stewardv1.EtcdMemberList
	if err := env.Client.List(ctx, &l, client.InNamespace(env.Namespace)); err != nil {
		return nil, apiError(err, "list", "etcdmembers", env.Namespace, "")
	}
	var out []stewardv1.EtcdMember
	for _, m := range l.Items {
		if m.Spec.ClusterName == cluster {
			out = append(out, m)
		}
	}
	return out, nil
}

func listBackups(ctx context.Context, env *Env, cluster string) ([]stewardv1.EtcdBackup, error) {
	var l stewardv1.EtcdBackupList
	if err := env.Client.List(ctx, &l, client.InNamespace(env.Namespace)); err != nil {
		return nil, apiError(err, "list", "etcdbackups", env.Namespace, "")
	}
	var out []stewardv1.EtcdBackup
	for _, b := range l.Items {
		if b.Spec.ClusterName == cluster {
			out = append(out, b)
		}
	}
	return out, nil
}

// errNoQuorum is returned by commands that must reach etcd when status says they cannot.
var errNoQuorum = errors.New("no quorum")

// requireQuorum fails fast, with what status says, instead of letting a command hang on an etcd
// that cannot answer.
func requireQuorum(ec *stewardv1.EtcdCluster) error {
	c := findCondition(ec.Status.Conditions, "Available")
	if c == nil || c.Status == metav1.ConditionTrue {
		return nil
	}
	hint := ""
	switch c.Reason {
	case "QuorumLost":
		hint = fmt.Sprintf("; see `kubectl etcd recover-quorum %s --dry-run`", ec.Name)
	case "MembersUnreachable":
		hint = "; the operator cannot reach members, which may still serve: check the path between them (docs/runbooks.md#stewardetcdmembersunreachable)"
	}
	return fmt.Errorf("%w: etcdcluster %q is not available (%s: %s)%s", errNoQuorum, ec.Name, c.Reason, c.Message, hint)
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
