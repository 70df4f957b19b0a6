package kubectletcd

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/plan"
	"github.com/etcd-steward/steward/internal/versionguard"
)

func newPlanCommand(get envFunc) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "plan CLUSTER [-f new.yaml]",
		Short: "Show what applying new.yaml would do, member by member, without changing anything",
		Long: `plan sends new.yaml to the API server as a dry-run update (dryRun=All: admission, defaults and
every validation rule run, nothing is stored), then compares each member's recorded template with
the result using the operator's own planner (internal/plan): which members restart, which are
resized in place or only relabelled, in the order the roll takes them (unready members first,
then followers from the highest ordinal, the leader last after a leadership handoff).

For a cluster taking over a running one (spec.bootstrap.join), plan without -f shows the hand-over
still ahead: the preflight's verdict, then each member added and each source member removed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := get(cmd)
			if err != nil {
				return err
			}
			if file == "" {
				live, err := getCluster(cmd.Context(), env, args[0])
				if err != nil {
					return err
				}
				steps := AdoptionSteps(live)
				if steps == nil {
					return fmt.Errorf("-f new.yaml is required (plan without it shows an adoption's hand-over)")
				}
				_, err = io.WriteString(env.Out, strings.Join(steps, "\n")+"\n")
				return err
			}
			var data []byte
			if file == "-" {
				data, err = io.ReadAll(env.In)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			want := &stewardv1.EtcdCluster{}
			if err := yaml.UnmarshalStrict(data, want); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			ctx := cmd.Context()
			live, err := getCluster(ctx, env, args[0])
			if err != nil {
				return err
			}
			if want.Name != "" && want.Name != live.Name {
				return fmt.Errorf("%s describes etcdcluster %q, not %q", file, want.Name, live.Name)
			}
			// Only the spec comes from the file: identity, status and the resourceVersion are the
			// live object's, so the dry run is exactly the update the user would make now.
			dry := live.DeepCopy()
			dry.Spec = want.Spec
			if err := env.Client.Update(ctx, dry, client.DryRunAll); err != nil {
				return fmt.Errorf("the API server refuses this change: %w", apiError(err, "update", "etcdclusters", env.Namespace, live.Name))
			}
			members, err := listMembers(ctx, env, live.Name)
			if err != nil {
				return err
			}
			_, err = io.WriteString(env.Out, strings.Join(PlanSteps(live, dry, members), "\n")+"\n")
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the EtcdCluster as you would apply it (- for stdin)")
	return cmd
}

// PlanSteps lists, in order, what the operator would do to move from live to next.
func PlanSteps(live, next *stewardv1.EtcdCluster, members []stewardv1.EtcdMember) []string {
	var steps []string
	add := func(format string, a ...any) {
		steps = append(steps, fmt.Sprintf("%d. ", len(steps)+1)+fmt.Sprintf(format, a...))
	}
	medium := live.Spec.Storage.Medium
	target := next.Spec.MemberTemplate
	if from, to := live.Spec.Version, next.Spec.Version; from != to {
		add("version %s -> %s (%s step)", from, to, plan.ClassifyVersion(from, to))
		switch {
		case versionguard.IsDowngrade(from, to) && versionguard.CheckDowngrade(from, to) == "":
			add("through etcd's downgrade protocol: a backup first (when an EtcdBackupSchedule backs the cluster up), "+
				"then etcd downgrade validate and enable %s", versionguard.Minor(to))
			add("wait until every member reports storage version %s.0; the members then roll leader last", versionguard.Minor(to))
		case plan.ClassifyVersion(from, to) == plan.StepDowngrade:
			add("refused: %s", versionguard.CheckDowngrade(from, to))
		case versionguard.CheckUpgrade(from, to) != "":
			add("refused: %s", versionguard.CheckUpgrade(from, to))
		}
	}
	type change struct {
		m    plan.RollRank
		name string
		c    plan.Change
	}
	leader := map[string]bool{}
	ready := map[string]bool{}
	for _, s := range live.Status.Members {
		leader[s.Name], ready[s.Name] = s.Role == stewardv1.RoleLeader, s.Ready
	}
	// Every member's change, by ordinal.
	var all []change
	for _, m := range members {
		all = append(all, change{name: m.Name, c: plan.Compare(m.Spec.Template, target, medium),
			m: plan.RollRank{Ordinal: m.Spec.Ordinal, Ready: ready[m.Name], Leader: leader[m.Name]}})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].m.Ordinal < all[j].m.Ordinal })
	rank := func(ch change) plan.RollRank { return ch.m }
	// A scale-in removes what the planner's surplus names: the highest ordinals; on memory storage
	// outdated members first, in the roll's order (each would need a replacement anyway), and
	// before anything is rolled (the planner scales a memory cluster in before it replaces).
	var surplus, outdated, current []change
	for i := len(all) - 1; i >= 0; i-- {
		if medium == stewardv1.StorageMediumMemory && all[i].c.Has(plan.ChangeRoll) {
			outdated = append(outdated, all[i])
		} else {
			current = append(current, all[i])
		}
	}
	plan.SortForRoll(outdated, rank)
	surplus = append(outdated, current...)
	lr, nr := replicas(live), replicas(next)
	removed := map[string]bool{}
	var removals []string
	for i := 0; i < int(lr-nr) && i < len(surplus); i++ {
		removed[surplus[i].name] = true
		removals = append(removals, surplus[i].name)
	}
	removeAll := func() {
		for _, name := range removals {
			add("remove member %s (leadership moved away first if it leads)", name)
		}
	}
	if medium == stewardv1.StorageMediumMemory {
		removeAll()
	}
	// The planner's passes (plan.roll): Pod metadata patched in place (by ordinal), then in-place
	// resizes, then rebuilds, each of the last two in the planner's own roll order.
	var patch, resize, rebuild []change
	for _, ch := range all {
		if removed[ch.name] {
			continue
		}
		switch {
		case ch.c.Has(plan.ChangeRoll):
			rebuild = append(rebuild, ch)
			continue
		case ch.c.Has(plan.ChangeMetadata):
			patch = append(patch, ch)
		}
		if ch.c.Has(plan.ChangeResize) {
			resize = append(resize, ch)
		}
	}
	plan.SortForRoll(resize, rank)
	plan.SortForRoll(rebuild, rank)
	for _, ch := range patch {
		add("%s: patch Pod labels/annotations in place", ch.name)
	}
	for _, ch := range resize {
		add("%s: resize CPU/memory in the running Pod, no restart", ch.name)
	}
	addFirst := next.Spec.MaxSurge() > 0
	for _, ch := range rebuild {
		switch {
		case medium == stewardv1.StorageMediumMemory && addFirst && ch.m.Ready:
			lead, moved := "", ""
			if ch.m.Leader {
				lead, moved = " (leader)", " after leadership moved"
			}
			add("%s%s: replace it add-first (memory storage: a new member on the new template joins as a learner and is "+
				"promoted, then %s is removed%s)", ch.name, lead, ch.name, moved)
		case medium == stewardv1.StorageMediumMemory:
			add("%s: replace it (memory storage: remove, add a learner on the new template, promote)", ch.name)
		case ch.m.Leader && ch.m.Ready:
			add("%s (leader): move leadership to a follower, then restart it on the new template", ch.name)
		default:
			add("%s: restart it on the new template (its PVC and member ID stay)", ch.name)
		}
	}
	if ls, ns := live.Spec.Storage.Size, next.Spec.Storage.Size; medium != stewardv1.StorageMediumMemory && ls != nil && ns != nil && ns.Cmp(*ls) > 0 {
		add("expand every member's PVC from %s to %s (no restart where the storage class expands online)", ls, ns)
	}
	for i := lr; i < nr; i++ {
		add("add a member as a learner, promote it once it caught up (%d of %d)", i-lr+1, nr-lr)
	}
	if medium != stewardv1.StorageMediumMemory {
		removeAll()
	}
	if len(steps) == 0 {
		steps = append(steps, "nothing to do: every member already runs this template")
	}
	if next.Spec.Paused {
		steps = append(steps, "spec.paused is set: none of this runs until `kubectl etcd resume "+live.Name+"`")
	}
	if next.Spec.UpdateStrategy.Type == stewardv1.OnDelete {
		steps = append(steps, "updateStrategy OnDelete: members restart only when you delete their Pods, one at a time")
	}
	return steps
}

func replicas(ec *stewardv1.EtcdCluster) int32 {
	if ec.Spec.Replicas == nil {
		return 3
	}
	return *ec.Spec.Replicas
}
