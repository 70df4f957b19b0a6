package backupplan

// Messages of phase decisions that tests and callers may match.
const (
	MsgJobDisappeared  = "the backup Job disappeared"
	MsgJobFailed       = "the backup Job failed"
	MsgSnapshotTaken   = "snapshot taken"
	MsgJobCreated      = "backup Job created"
	MsgJobRunning      = "the backup Job is running"
	MsgJobStarting     = "the backup Job is waiting for its Pod to start"
	MsgWaitClusterGone = "waiting for the EtcdCluster to exist"
	MsgWaitQuorum      = "waiting for the EtcdCluster to have quorum"
)

// JobFacts is what the controller knows about a backup's worker Job.
type JobFacts struct {
	// Exists: the Job is there. For a Running backup, a Job missing from the informer cache must be
	// confirmed by a live read before it counts as gone: one created a moment ago may not be cached.
	Exists bool
	// Active: a Pod of the Job is running.
	Active bool
	// Succeeded and Failed: the Job's Complete and Failed conditions.
	Succeeded bool
	Failed    bool
	// ResultErr is why the worker's result could not be read or parsed ("" when it was).
	ResultErr string
	// Message is the worker's own message: what it took, or why it failed.
	Message string
}

// PhaseInput is one EtcdBackup's state and the facts that move it.
type PhaseInput struct {
	Phase   Phase  // "" counts as Pending
	Message string // the current status message, kept by phases that do not change
	Job     JobFacts
	// ClusterExists and ClusterHasQuorum gate starting a backup; a running one is left to its Job.
	ClusterExists    bool
	ClusterHasQuorum bool
}

// PhaseDecision is the phase to record and whether to create the Job first.
type PhaseDecision struct {
	Phase   Phase
	Message string
	// CreateJob: create the worker Job, then record Phase (Running). In that order: a crash in
	// between leaves a Pending backup whose Job exists, which NextPhase moves to Running, whereas
	// Running without a Job would read as a Job that disappeared.
	CreateJob bool
}

// NextPhase moves a backup along Pending → Running → Succeeded | Failed. Succeeded and Failed
// never change. A Pending backup waits for its cluster to exist and have quorum, then gets its
// Job; a Job found already there (the operator crashed after creating it) is followed as if
// Running. A Running backup ends with its Job: Failed with the Job's message when the Job failed
// or its result is unreadable, Succeeded when it completed, Failed when the Job is gone.
func NextPhase(in PhaseInput) PhaseDecision {
	phase := in.Phase
	if phase == "" {
		phase = PhasePending
	}
	switch {
	case phase.Terminal():
		return PhaseDecision{Phase: phase, Message: in.Message}
	case phase == PhasePending && !in.Job.Exists:
		switch {
		case !in.ClusterExists:
			return PhaseDecision{Phase: PhasePending, Message: MsgWaitClusterGone}
		case !in.ClusterHasQuorum:
			return PhaseDecision{Phase: PhasePending, Message: MsgWaitQuorum}
		}
		return PhaseDecision{Phase: PhaseRunning, Message: MsgJobCreated, CreateJob: true}
	case phase != PhasePending && phase != PhaseRunning:
		// An unknown phase is nobody's to interpret: left as it is.
		return PhaseDecision{Phase: phase, Message: in.Message}
	}
	return followJob(in.Job)
}

// followJob is the phase of a backup whose Job was created.
func followJob(j JobFacts) PhaseDecision {
	switch {
	case !j.Exists:
		return PhaseDecision{Phase: PhaseFailed, Message: MsgJobDisappeared}
	case j.Failed:
		return PhaseDecision{Phase: PhaseFailed, Message: orDefault(j.Message, MsgJobFailed)}
	case j.Succeeded && j.ResultErr != "":
		return PhaseDecision{Phase: PhaseFailed, Message: "the backup Job completed but its result is unreadable: " + j.ResultErr}
	case j.Succeeded:
		return PhaseDecision{Phase: PhaseSucceeded, Message: orDefault(j.Message, MsgSnapshotTaken)}
	case j.Active:
		return PhaseDecision{Phase: PhaseRunning, Message: MsgJobRunning}
	}
	return PhaseDecision{Phase: PhaseRunning, Message: MsgJobStarting}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
