package plan

import (
	"fmt"
	"slices"
	"strings"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/versionguard"
)

// A downgrade by one minor goes through etcd's own protocol (etcd's v3.6 and v3.7 downgrade
// guides): the intent is recorded (Enabling), etcd validates and enables the downgrade (Enabled),
// every member lowers its storage version, and only then is the lower spec.version adopted, so the
// ordinary roll takes the members onto the older image one at a time, the leader last. etcd ends
// the downgrade itself once every member runs the target (Completed). spec.version edited back up
// before that cancels it in etcd (Cancelling), and the roll takes the members already on the older
// image forward again (Cancelled). A 3.5 member reports neither storage version nor downgrade
// state: what etcd says is read from the newer members, and the stage from status.downgrade.

// downgrade is the step: start, enable, cancel or finish a downgrade; the roll does the rest.
func (v *view) downgrade() (Action, bool) {
	d := v.f.Cluster.Status.Downgrade
	if d == nil || !d.Stage.Active() {
		return v.startDowngrade()
	}
	want := v.f.specTemplate().Version
	withdrawn := versionguard.Minor(want) != versionguard.Minor(d.Target)
	enabled := v.etcdDowngradeTarget() != ""
	switch d.Stage {
	case stewardv1.DowngradeEnabling:
		if withdrawn {
			return act(Downgrade, "", ReasonDowngrading, "spec.version is %s again before etcd's downgrade to %s was "+
				"enabled: cancelling it (etcd's downgrade cancel)", want, d.Target).toStage(stewardv1.DowngradeCancelling), true
		}
		if a, ok := v.downgradeBackupWait(d); ok {
			return a, true
		}
		if r := v.gate(); !r.Passed() {
			return wait(ReasonWaitingForHealth, "enabling etcd's downgrade to %s waits for the recovery gate: %s", d.Target, r), true
		}
		return act(Downgrade, "", ReasonDowngrading, "enabling etcd's downgrade to %s (downgrade validate, then enable)",
			versionguard.Minor(d.Target)).toStage(stewardv1.DowngradeEnabled), true
	case stewardv1.DowngradeEnabled:
		if withdrawn {
			return act(Downgrade, "", ReasonDowngrading, "spec.version is %s again: cancelling etcd's downgrade to %s; "+
				"members already on %s roll forward after it", want, d.Target, d.Target).toStage(stewardv1.DowngradeCancelling), true
		}
		if !v.f.specAdopted() {
			if !enabled && v.etcdSpeaks(d.From) {
				// Recorded as enabled, but etcd does not say so (another client cancelled it): again.
				return act(Downgrade, "", ReasonDowngrading, "etcd no longer reports the downgrade to %s enabled: "+
					"enabling it again", d.Target).toStage(stewardv1.DowngradeEnabled), true
			}
			if why := v.storageNotLowered(d.Target); why != "" {
				return wait(ReasonDowngrading, "etcd's downgrade to %s is enabled; the members roll once every one "+
					"reports storage version %s: %s", d.Target, versionguard.Minor(d.Target)+".0", why), true
			}
			return Action{}, false // adopt takes the spec (it ran before this step, and will again)
		}
		if why, rolling := v.downgradeUnfinished(d.Target); rolling {
			return Action{}, false // the roll takes the members
		} else if why != "" {
			return wait(ReasonDowngrading, "every member runs %s; %s", d.Target, why), true
		}
		return act(Downgrade, "", ReasonDowngrading, "every member runs %s and etcd ended the downgrade", d.Target).
			toStage(stewardv1.DowngradeCompleted), true
	case stewardv1.DowngradeCancelling:
		if enabled {
			return act(Downgrade, "", ReasonDowngrading, "etcd still reports the downgrade to %s: cancelling it", d.Target).
				toStage(stewardv1.DowngradeCancelling), true
		}
		if why, _ := v.downgradeUnfinished(want); !v.f.specAdopted() || why != "" {
			return Action{}, false
		}
		return act(Downgrade, "", ReasonDowngrading, "the downgrade to %s is cancelled: every member runs %s again",
			d.Target, want).toStage(stewardv1.DowngradeCancelled), true
	}
	return Action{}, false
}

func (a Action) toStage(s stewardv1.DowngradeStage) Action { a.DowngradeStage = s; return a }

// startDowngrade records the intent of a downgrade the spec asks for, once the cluster is healthy
// and at a safe point. What refuses it (more than one minor, a version etcd cannot go back from,
// flags the older etcd does not know) is versionRefusal's to report.
func (v *view) startDowngrade() (Action, bool) {
	want := v.f.specTemplate().Version
	from := v.newestServer()
	if v.f.specAdopted() || !versionguard.IsDowngrade(from, want) || versionguard.CheckDowngrade(from, want) != "" ||
		len(versionguard.UnknownArgs(want, v.f.specTemplate().Options.ExtraArgs)) > 0 || v.partialUpgrade(want) {
		return Action{}, false
	}
	if !v.safePoint() {
		return Action{}, false
	}
	if r := v.gate(); !r.Passed() {
		return wait(ReasonWaitingForHealth, "the downgrade from %s to %s waits for the recovery gate: %s", from, want, r), true
	}
	a := act(Downgrade, "", ReasonDowngrading, "recording the downgrade from %s to %s before enabling it in etcd", from, want).
		toStage(stewardv1.DowngradeEnabling)
	a.DowngradeFrom = from
	return a, true
}

// newestServer is the newest server version any member runs or is recorded at.
func (v *view) newestServer() string {
	newest := ""
	for _, m := range v.members {
		for _, r := range v.runningVersions(m) {
			if !r.server {
				continue
			}
			if newest == "" || ClassifyVersion(newest, r.version) == StepMinorUp || ClassifyVersion(newest, r.version) == StepSkippedMinor {
				newest = r.version
			}
		}
	}
	return newest
}

// etcdDowngradeTarget is the downgrade target a member reports enabled, "" when none does (a 3.5
// member never reports one).
func (v *view) etcdDowngradeTarget() string {
	for _, e := range v.f.Etcd.Endpoints {
		if e.Reachable && e.DowngradeEnabled {
			return e.DowngradeTarget
		}
	}
	return ""
}

// etcdSpeaks reports whether the cluster version etcd reported is version's minor.
func (v *view) etcdSpeaks(version string) bool {
	cv := v.f.Etcd.ClusterVersion
	return cv != "" && versionguard.Minor(cv) == versionguard.Minor(version)
}

// partialUpgrade: the cluster version is still the spec's minor (an upgrade that did not finish:
// etcd raises it only once every member runs the newer minor) and no member's storage version is
// newer, so members go back by a plain roll, as etcd allows, without its downgrade protocol. Fails
// closed: an unread cluster version, or a member that does not answer, is no evidence.
func (v *view) partialUpgrade(want string) bool {
	if !v.etcdSpeaks(want) {
		return false
	}
	w, _ := parseVersion(want)
	for _, m := range v.members {
		if m.Deleting {
			continue
		}
		if m.ep == nil || !m.ep.Reachable {
			return false
		}
		if s := m.ep.StorageVersion; s != "" {
			if sv, ok := parseVersion(storageFull(s)); !ok || sv[0] != w[0] || sv[1] > w[1] {
				return false
			}
		}
	}
	return true
}

// storageNotLowered says which members do not report the target's storage version yet; "" when
// every member does. A member on the target minor already (a 3.5 member reports none) counts.
func (v *view) storageNotLowered(target string) string {
	minor := versionguard.Minor(target)
	var behind []string
	for _, m := range v.members {
		if m.Deleting {
			continue
		}
		switch e := m.ep; {
		case e == nil || !e.Reachable:
			behind = append(behind, m.Name+" does not answer")
		case versionguard.Minor(e.Version) == minor:
		case e.StorageVersion == "" || versionguard.Minor(e.StorageVersion) != minor:
			behind = append(behind, fmt.Sprintf("%s reports %q", m.Name, e.StorageVersion))
		}
	}
	slices.Sort(behind)
	return strings.Join(behind, ", ")
}

// storageFull is a version etcd may report as major.minor ("3.6", as some storage and cluster
// versions are) in full ("3.6.0"), for ClassifyVersion.
func storageFull(s string) string {
	if strings.Count(s, ".") == 1 {
		return s + ".0"
	}
	return s
}

// downgradeUnfinished says what is left before every member runs version's minor and etcd reports
// no downgrade to it; "" when nothing is. rolling: members are still to roll (the roll's business).
func (v *view) downgradeUnfinished(version string) (why string, rolling bool) {
	minor := versionguard.Minor(version)
	for _, m := range v.members {
		if m.Deleting {
			continue
		}
		if m.ep == nil || !m.ep.Reachable {
			return m.Name + " does not answer", true
		}
		if versionguard.Minor(m.ep.Version) != minor {
			return fmt.Sprintf("%s runs %s", m.Name, m.ep.Version), true
		}
	}
	if t := v.etcdDowngradeTarget(); t != "" && minor != versionguard.Minor(v.f.Cluster.Status.Downgrade.From) {
		return "etcd still reports the downgrade to " + t + " enabled (it ends it within its downgrade-check-time)", false
	}
	return "", false
}

// downgradeAllows reports whether a member's version line may step down to the spec's version:
// etcd's downgrade to that minor is enabled and every member reports the lowered storage version,
// or the cluster still speaks the spec's minor (an unfinished upgrade going back).
func (v *view) downgradeAllows(r runningVersion, want string) bool {
	if !versionguard.IsDowngrade(r.version, want) {
		return false
	}
	if v.partialUpgrade(want) {
		return true
	}
	d := v.f.Cluster.Status.Downgrade
	return d != nil && d.Stage == stewardv1.DowngradeEnabled && versionguard.Minor(d.Target) == versionguard.Minor(want) &&
		v.etcdDowngradeTarget() != "" && versionguard.Minor(v.etcdDowngradeTarget()) == versionguard.Minor(want) &&
		v.storageNotLowered(want) == ""
}

// downgradeRefusal holds the adoption of a spec that withdrew a downgrade until etcd's downgrade
// is cancelled: the members roll forward only after.
func (v *view) downgradeRefusal() string {
	d := v.f.Cluster.Status.Downgrade
	if d == nil || !d.Stage.Active() {
		return ""
	}
	want := v.f.specTemplate().Version
	if versionguard.Minor(want) == versionguard.Minor(d.Target) {
		return ""
	}
	if d.Stage != stewardv1.DowngradeCancelling || v.etcdDowngradeTarget() != "" {
		return fmt.Sprintf("spec.version %s waits for etcd's downgrade to %s to be cancelled first", want, d.Target)
	}
	return ""
}

// downgradeBackupWait holds enabling etcd's downgrade until the backup taken for it succeeded. A
// failed or vanished backup holds it for good: the user withdraws the downgrade (spec.version
// back) and asks again, which takes a new one.
func (v *view) downgradeBackupWait(d *stewardv1.DowngradeStatus) (Action, bool) {
	b := v.f.DowngradeBackup
	if d.Backup == "" || b == nil || b.Phase == stewardv1.BackupSucceeded {
		return Action{}, false
	}
	switch b.Phase {
	case stewardv1.BackupFailed, "":
		what := "failed: " + b.Message
		if b.Phase == "" {
			what = "is gone"
		}
		return wait(ReasonDowngrading, "the backup %s taken before the downgrade to %s %s; etcd's downgrade is not "+
			"enabled. Set spec.version back to %s to withdraw it, then ask again for a new backup", d.Backup, d.Target,
			what, d.From), true
	}
	return wait(ReasonDowngrading, "the downgrade to %s waits for the backup %s taken first (%s)", d.Target, d.Backup,
		b.Phase), true
}
