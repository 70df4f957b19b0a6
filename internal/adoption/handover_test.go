package adoption

import (
	"fmt"
	"slices"
	"testing"
)

// runHandOver plays the hand-over to the end and returns the voter counts it passes through.
func runHandOver(t *testing.T, sources, replicas int) []int {
	t.Helper()
	ours := 0
	seen := []int{ours + sources}
	for range 40 {
		switch Next(ours, sources, replicas) {
		case Add:
			ours++
		case RemoveSource:
			sources--
		case Finished:
			if ours != replicas || sources != 0 {
				t.Fatalf("finished at ours=%d sources=%d", ours, sources)
			}
			return seen
		}
		seen = append(seen, ours+sources)
	}
	t.Fatalf("no end after 40 moves: %v", seen)
	return nil
}

func tolerance(voters int) int { return (voters - 1) / 2 }

func TestNextSequences(t *testing.T) {
	cases := []struct {
		sources, replicas int
		want              []int
	}{
		{3, 3, []int{3, 4, 3, 4, 3, 4, 3}},
		{5, 3, []int{5, 4, 3, 4, 3, 4, 3, 4, 3}},
		{1, 3, []int{1, 2, 3, 4, 3}},
		{3, 5, []int{3, 4, 5, 6, 5, 6, 5, 6, 5}},
		{1, 1, []int{1, 2, 1}},
		{3, 1, []int{3, 2, 1, 2, 1}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d into %d", tc.sources, tc.replicas), func(t *testing.T) {
			got := runHandOver(t, tc.sources, tc.replicas)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("voters %v, want %v", got, tc.want)
			}
		})
	}
}

// The promise of the issue: fault tolerance never below min(source's, target's), every size.
func TestNextKeepsFaultTolerance(t *testing.T) {
	for s := 1; s <= 7; s++ {
		for r := 1; r <= 7; r++ {
			floor := min(tolerance(s), tolerance(r))
			for _, v := range runHandOver(t, s, r) {
				if tolerance(v) < floor {
					t.Errorf("%d into %d: %d voters tolerate %d failures, below %d", s, r, v, tolerance(v), floor)
				}
			}
		}
	}
}

func TestRemovalOrder(t *testing.T) {
	got := RemovalOrder([]string{"etcd-0", "etcd-10", "etcd-2", "vm-b", "vm-a", "etcd-1"})
	want := []string{"etcd-10", "etcd-2", "etcd-1", "etcd-0", "vm-b", "vm-a"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestPodOf(t *testing.T) {
	pods := []string{"etcd-0", "etcd-1", "etcd-10"}
	for url, want := range map[string]string{
		"http://etcd-1.etcd-headless.ns.svc.cluster.local:2380": "etcd-1",
		"http://etcd-10.etcd-headless.ns.svc:2380":              "etcd-10",
		"https://etcd-1:2380":                                   "etcd-1",
		"http://etcd-2.etcd-headless.ns.svc:2380":               "",
		"http://10.0.0.1:2380":                                  "",
	} {
		if got := PodOf(url, pods); got != want {
			t.Errorf("PodOf(%s) = %q, want %q", url, got, want)
		}
	}
}

// Next never asks for a removal with no source left, nor an add past replicas.
func TestNextNeverOvershoots(t *testing.T) {
	for ours := 0; ours <= 8; ours++ {
		for sources := 0; sources <= 8; sources++ {
			for replicas := 1; replicas <= 7; replicas++ {
				switch Next(ours, sources, replicas) {
				case RemoveSource:
					if sources == 0 {
						t.Errorf("Next(%d, %d, %d) removes a source that is not there", ours, sources, replicas)
					}
				case Add:
					if ours >= replicas {
						t.Errorf("Next(%d, %d, %d) adds past replicas", ours, sources, replicas)
					}
				case Finished:
					if sources > 0 || ours < replicas {
						t.Errorf("Next(%d, %d, %d) finishes early", ours, sources, replicas)
					}
				}
			}
		}
	}
}

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"etcd-2": 2, "etcd-10": 10, "vm": -1, "7": 7, "a-b-0": 0} {
		if got := Ordinal(name); got != want {
			t.Errorf("Ordinal(%q) = %d, want %d", name, got, want)
		}
	}
}

// The hand-over's first move from every state the preflight lets through (a source of 1 to 7,
// Steward not started): never a removal that would leave the source below its own tolerance
// before Steward has a voter.
func TestFirstMove(t *testing.T) {
	for sources := 1; sources <= 7; sources++ {
		for replicas := 1; replicas <= 7; replicas++ {
			move := Next(0, sources, replicas)
			wantRemove := sources > replicas
			if (move == RemoveSource) != wantRemove || move == Finished {
				t.Errorf("%d into %d: first move %s", sources, replicas, move)
			}
		}
	}
}

func TestPodOfIgnoresPortsAndPaths(t *testing.T) {
	pods := []string{"etcd-0"}
	for _, url := range []string{"http://etcd-0:2380/", "etcd-0.etcd-headless:2380", "http://etcd-0/x"} {
		if got := PodOf(url, pods); got != "etcd-0" {
			t.Errorf("PodOf(%q) = %q", url, got)
		}
	}
	if got := PodOf("http://etcd-00.etcd-headless:2380", pods); got != "" {
		t.Errorf("a longer name matched: %q", got)
	}
}
