package backupplan

import "testing"

func TestNextPhase(t *testing.T) {
	up := func(in PhaseInput) PhaseInput { in.ClusterExists, in.ClusterHasQuorum = true, true; return in }
	running := JobFacts{Exists: true, Active: true}
	tests := []struct {
		name string
		in   PhaseInput
		want PhaseDecision
	}{
		// Pending: wait for the cluster, then create the Job.
		{name: "new backup, cluster healthy: create the Job", in: up(PhaseInput{}),
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobCreated, CreateJob: true}},
		{name: "Pending, cluster healthy: create the Job", in: up(PhaseInput{Phase: PhasePending}),
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobCreated, CreateJob: true}},
		{name: "Pending, no cluster: wait", in: PhaseInput{Phase: PhasePending},
			want: PhaseDecision{Phase: PhasePending, Message: MsgWaitClusterGone}},
		{name: "Pending, no quorum: wait", in: PhaseInput{Phase: PhasePending, ClusterExists: true},
			want: PhaseDecision{Phase: PhasePending, Message: MsgWaitQuorum}},
		// Pending with a Job: the operator crashed after creating it; follow it.
		{name: "Pending, Job already created: Running", in: PhaseInput{Phase: PhasePending, Job: running},
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobRunning}},
		{name: "Pending, Job already done", in: PhaseInput{Phase: PhasePending, Job: JobFacts{Exists: true, Succeeded: true, Message: "revision 42"}},
			want: PhaseDecision{Phase: PhaseSucceeded, Message: "revision 42"}},
		{name: "Pending, Job already failed", in: PhaseInput{Phase: PhasePending, Job: JobFacts{Exists: true, Failed: true}},
			want: PhaseDecision{Phase: PhaseFailed, Message: MsgJobFailed}},
		// Running follows the Job, whatever the cluster does meanwhile.
		{name: "Running, Pod not started yet", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true}},
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobStarting}},
		{name: "Running, Job active", in: up(PhaseInput{Phase: PhaseRunning, Job: running}),
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobRunning}},
		{name: "Running, quorum lost meanwhile: still the Job's call", in: PhaseInput{Phase: PhaseRunning, Job: running},
			want: PhaseDecision{Phase: PhaseRunning, Message: MsgJobRunning}},
		{name: "Running, Job completed", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true, Succeeded: true, Message: "snapshot of revision 42, 3.1 MiB"}},
			want: PhaseDecision{Phase: PhaseSucceeded, Message: "snapshot of revision 42, 3.1 MiB"}},
		{name: "Running, Job completed without a message", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true, Succeeded: true}},
			want: PhaseDecision{Phase: PhaseSucceeded, Message: MsgSnapshotTaken}},
		{name: "Running, Job completed, result unreadable", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true, Succeeded: true, ResultErr: "unexpected end of JSON input"}},
			want: PhaseDecision{Phase: PhaseFailed, Message: "the backup Job completed but its result is unreadable: unexpected end of JSON input"}},
		{name: "Running, Job failed with the worker's message", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true, Failed: true, Message: "upload: access denied"}},
			want: PhaseDecision{Phase: PhaseFailed, Message: "upload: access denied"}},
		{name: "Running, Job failed without a message", in: PhaseInput{Phase: PhaseRunning, Job: JobFacts{Exists: true, Failed: true, ResultErr: "no result"}},
			want: PhaseDecision{Phase: PhaseFailed, Message: MsgJobFailed}},
		{name: "Running, Job deleted", in: up(PhaseInput{Phase: PhaseRunning}),
			want: PhaseDecision{Phase: PhaseFailed, Message: "the backup Job disappeared"}},
		{name: "Running, Job deleted and the cluster gone", in: PhaseInput{Phase: PhaseRunning},
			want: PhaseDecision{Phase: PhaseFailed, Message: MsgJobDisappeared}},
		// Terminal phases never change, whatever the Job says.
		{name: "Succeeded stays", in: up(PhaseInput{Phase: PhaseSucceeded, Message: "rev 42", Job: JobFacts{Exists: true, Failed: true}}),
			want: PhaseDecision{Phase: PhaseSucceeded, Message: "rev 42"}},
		{name: "Succeeded stays when the Job is gone", in: PhaseInput{Phase: PhaseSucceeded, Message: "rev 42"},
			want: PhaseDecision{Phase: PhaseSucceeded, Message: "rev 42"}},
		{name: "Failed stays, never re-run", in: up(PhaseInput{Phase: PhaseFailed, Message: "boom"}),
			want: PhaseDecision{Phase: PhaseFailed, Message: "boom"}},
		{name: "Failed stays when a Job completes late", in: PhaseInput{Phase: PhaseFailed, Message: "boom", Job: JobFacts{Exists: true, Succeeded: true}},
			want: PhaseDecision{Phase: PhaseFailed, Message: "boom"}},
		{name: "an unknown phase is left alone", in: up(PhaseInput{Phase: "Paused", Message: "m"}),
			want: PhaseDecision{Phase: "Paused", Message: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextPhase(tt.in); got != tt.want {
				t.Errorf("NextPhase = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestNextPhaseLifecycle walks one backup from creation to success: exactly one Job is created,
// and once terminal nothing moves it.
func TestNextPhaseLifecycle(t *testing.T) {
	in := PhaseInput{}
	jobs := 0
	for step, job := range []JobFacts{
		{},                           // no cluster yet
		{},                           // cluster, no quorum
		{},                           // healthy: create
		{Exists: true},               // Pod scheduling
		{Exists: true, Active: true}, // running
		{Exists: true, Succeeded: true, Message: "rev 9"},
		{}, // Job garbage-collected
		{Exists: true, Failed: true, Message: "late"}, // nonsense afterwards
	} {
		in.Job = job
		in.ClusterExists, in.ClusterHasQuorum = step >= 1, step >= 2
		d := NextPhase(in)
		if d.CreateJob {
			jobs++
		}
		in.Phase, in.Message = d.Phase, d.Message
	}
	if jobs != 1 || in.Phase != PhaseSucceeded || in.Message != "rev 9" {
		t.Errorf("after the walk: %d Jobs, %s %q; want 1 Job, Succeeded \"rev 9\"", jobs, in.Phase, in.Message)
	}
}
