package kubectletcd

import (
	"fmt"
	"slices"
	"strings"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/adoption"
)

// AdoptionSteps is the hand-over still ahead of a cluster that takes over a running one
// (spec.bootstrap.join), from its status: the preflight's verdict, then each member added and each
// source member removed, in the order the planner takes them (internal/adoption.Next). nil when
// the cluster is not adopting.
func AdoptionSteps(ec *stewardv1.EtcdCluster) []string {
	j := ec.Spec.Bootstrap
	if j == nil || j.Join == nil {
		return nil
	}
	a := ec.Status.Adoption
	if a == nil {
		return []string{"1. the preflight has not run yet: the operator checks the source before anything changes"}
	}
	switch a.Phase {
	case stewardv1.AdoptionDone:
		return []string{"1. the adoption is done: the cluster is Steward's"}
	case stewardv1.AdoptionAborted:
		return []string{"1. the adoption was aborted; the source runs as it did: delete this EtcdCluster"}
	}
	var steps []string
	add := func(format string, args ...any) {
		steps = append(steps, fmt.Sprintf("%d. ", len(steps)+1)+fmt.Sprintf(format, args...))
	}
	if a.Phase == stewardv1.AdoptionRefused || a.Phase == stewardv1.AdoptionPreflight {
		for _, c := range a.Checks {
			if !c.Passed {
				add("preflight refused at %s: %s. Nothing of the source has changed", c.Name, c.Message)
				return steps
			}
		}
		if len(a.Checks) > 0 {
			add("preflight passed (%d checks): cluster %s, etcd %s", len(a.Checks), a.ClusterID, a.Version)
		}
	}
	if j.Join.Abort && a.Phase != stewardv1.AdoptionHandingOver {
		add("abort: remove Steward's members from etcd one at a time (leadership handed back to a source member first)")
		return steps
	}
	var sources []string
	pod := map[string]string{}
	for _, s := range a.SourceMembers {
		if s.State != stewardv1.SourceServing {
			continue
		}
		key := s.Name
		if s.Pod != "" {
			key = s.Pod
		}
		sources = append(sources, key)
		pod[key] = s.Pod
	}
	sources = adoption.RemovalOrder(sources)
	ours := 0
	for _, m := range ec.Status.Members {
		if m.Role == stewardv1.RoleLeader || m.Role == stewardv1.RoleFollower {
			ours++
		}
	}
	want := int(replicas(ec))
	set := j.Join.StatefulSetName
	left := int32(len(sources))
	for range 2 * (want + len(sources) + 1) {
		switch adoption.Next(ours, len(sources), want) {
		case adoption.Add:
			ours++
			add("add a Steward member as a learner, promote it once it caught up (%d voters after)", ours+len(sources))
			continue
		case adoption.RemoveSource:
			victim := sources[0]
			sources = sources[1:]
			left--
			stop := "its owner stops the process (Steward never deletes what it did not create)"
			if set != "" && pod[victim] != "" {
				stop = fmt.Sprintf("scale StatefulSet %s to %d and wait for Pod %s to go", set, left, pod[victim])
			}
			add("remove source member %s from etcd (leadership moved to a Steward member first if it leads); %s (%d voters after)",
				victim, stop, ours+len(sources))
			continue
		}
		break
	}
	add("done: the cluster is an ordinary Steward cluster with %d members", want)
	if ec.Spec.Paused {
		add("spec.paused is set: none of this runs until `kubectl etcd resume %s`", ec.Name)
	}
	return steps
}

// adoptionLines are status lines for a cluster taking over a running one.
func adoptionLines(line func(k, format string, a ...any), a *stewardv1.AdoptionStatus) {
	if a == nil {
		return
	}
	line("Adoption", "%s%s", a.Phase, strings.TrimSuffix(": "+a.Message, ": "))
	var parts []string
	for _, s := range a.SourceMembers {
		p := s.Name + " " + string(s.State)
		if s.Pod != "" {
			p += " (Pod " + s.Pod + ")"
		}
		parts = append(parts, p)
	}
	slices.Sort(parts)
	if len(parts) > 0 {
		line("Source members", "%s", strings.Join(parts, ", "))
	}
}
