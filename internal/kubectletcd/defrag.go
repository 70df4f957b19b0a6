package kubectletcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

func newDefragCommand(get envFunc) *cobra.Command {
	var timeout time.Duration
	var noWait bool
	cmd := &cobra.Command{
		Use:   "defrag CLUSTER [MEMBER]",
		Short: "Defragment every member, or one, now, through the operator (followers first, the leader last)",
		Long: `Asks Steward for a defragmentation without touching the spec: the annotation
` + stewardv1.AnnotationDefragmentRequested + ` (the time of the request) on the EtcdCluster, or on one
EtcdMember when MEMBER is given. Steward defragments each member not defragmented since, one at a time
through its disruption chokepoint and recovery gate, the leader last after a leadership handoff
(trigger "Requested"), even with defragmentation.enabled false. defrag waits until each asked member
reports a defragmentation that ended after the request, unless --no-wait.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			member := ""
			if len(args) == 2 {
				member = args[1]
			}
			return defrag(cmd.Context(), env, args[0], member, timeout, noWait)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the members")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "ask and return")
	return cmd
}

func defrag(ctx context.Context, env *Env, name, member string, timeout time.Duration, noWait bool) error {
	ec, err := getCluster(ctx, env, name)
	if err != nil {
		return err
	}
	if err := requireQuorum(ec); err != nil {
		return err
	}
	if r := ec.Spec.Replicas; r != nil && *r == 1 && !ec.Spec.UpdateStrategy.AllowDowntime {
		return fmt.Errorf("etcdcluster %q has one member: Steward defragments it only with spec.updateStrategy.allowDowntime (it serves nothing meanwhile)", name)
	}
	// Whole seconds: the operator compares the request with times it recorded, to the second.
	asked := requestTime(env.Now, time.Sleep, lastDefragmented(ec, member))
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		stewardv1.AnnotationDefragmentRequested: asked.Format(time.RFC3339)}}})
	var target client.Object = ec
	kind, what := "etcdclusters", fmt.Sprintf("every member of %q", name)
	if member != "" {
		m, err := getMember(ctx, env, name, member)
		if err != nil {
			return err
		}
		target, kind, what = m, "etcdmembers", fmt.Sprintf("%s of %q", member, name)
	}
	if err := env.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return apiError(err, "patch", kind, env.Namespace, target.GetName())
	}
	_, _ = fmt.Fprintf(env.Out, "asked Steward to defragment %s (%s=%s)\n", what, stewardv1.AnnotationDefragmentRequested, asked.Format(time.RFC3339))
	if noWait {
		return nil
	}
	return waitDefragmented(ctx, env, name, member, asked, timeout)
}

// getMember finds the cluster's EtcdMember by its name.
func getMember(ctx context.Context, env *Env, cluster, member string) (*stewardv1.EtcdMember, error) {
	members, err := listMembers(ctx, env, cluster)
	if err != nil {
		return nil, err
	}
	for i := range members {
		if members[i].Name == member {
			return &members[i], nil
		}
	}
	return nil, fmt.Errorf("etcdcluster %q has no member %q", cluster, member)
}

// waitDefragmented waits until the cluster's status shows each asked voter's latest
// defragmentation ended after the request (a failed one counts as an answer: it is printed, and
// the command fails). The cluster's status, not the EtcdMembers': it is what `kubectl get` and
// `kubectl etcd status` show next, and the command must not return before they say it.
// requestTime is the whole second a request is stamped with: after the last defragmentation the
// members recorded (latest), or a member that finished in this very second would read as already
// done (status times have whole seconds). That waits at most a second.
func requestTime(now func() time.Time, sleep func(time.Duration), latest time.Time) time.Time {
	asked := now().UTC().Truncate(time.Second)
	if asked.After(latest) {
		return asked
	}
	if d := latest.Add(time.Second).Sub(now()); d > 0 && d <= 2*time.Second {
		sleep(d)
	}
	return now().UTC().Truncate(time.Second)
}

// lastDefragmented is the latest defragmentation recorded on the members asked for (member, or
// all when it is "").
func lastDefragmented(ec *stewardv1.EtcdCluster, member string) time.Time {
	var latest time.Time
	for _, m := range ec.Status.Members {
		if (member == "" || m.Name == member) && m.Defragmentation != nil && m.Defragmentation.Last != nil &&
			m.Defragmentation.Last.Time.After(latest) {
			latest = m.Defragmentation.Last.Time.Time
		}
	}
	return latest
}

// waitDefragmented waits until every member asked for reports a successful defragmentation after
// the request. A failed or interrupted one is reported but does not end the wait: the request
// stays open for the operator until a success (it tries a failed member again after a back-off,
// and an interrupted one at once), so the command follows it; at the timeout it names the
// members that did not succeed and how each last ended.
func waitDefragmented(ctx context.Context, env *Env, name, member string, asked time.Time, timeout time.Duration) error {
	reported := map[string]time.Time{}
	pending := map[string]string{}
	err := poll(ctx, timeout, 2*time.Second, func(ctx context.Context) (bool, error) {
		ec, err := getCluster(ctx, env, name)
		if err != nil {
			return false, err
		}
		done, voters := 0, 0
		clear(pending)
		for _, m := range ec.Status.Members {
			if (member != "" && m.Name != member) || m.Role == "" || m.Role == stewardv1.RoleLearner {
				continue
			}
			voters++
			d := m.Defragmentation
			if d == nil || d.Last == nil || d.Last.Time.Time.Before(asked) {
				pending[m.Name] = "no result yet"
				continue
			}
			l := d.Last
			if !reported[m.Name].Equal(l.Time.Time) || reported[m.Name].IsZero() {
				reported[m.Name] = l.Time.Time
				_, _ = fmt.Fprintf(env.Out, "%s: %s, %s -> %s in %dms\n", m.Name, l.Outcome, qty(l.SizeBefore), qty(l.SizeAfter), l.DurationMilliseconds)
			}
			if l.Outcome != stewardv1.DefragmentationSucceeded {
				pending[m.Name] = string(l.Outcome) + " at " + l.Time.UTC().Format(time.RFC3339)
				continue
			}
			done++
		}
		return voters > 0 && done == voters, nil
	})
	if err != nil && len(pending) > 0 {
		var why []string
		for _, n := range slices.Sorted(maps.Keys(pending)) {
			why = append(why, n+": "+pending[n])
		}
		return fmt.Errorf("%w; not defragmented successfully yet: %s (Steward tries a failed member again after a "+
			"back-off: kubectl etcd status shows it)", err, strings.Join(why, ", "))
	}
	return err
}

func qty(q *resource.Quantity) string {
	if q == nil {
		return "?"
	}
	return size(q.Value())
}
