package plan

import (
	"fmt"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// A member's data binds the etcd that may start on it, whatever its Pod says: etcd starts only on
// data of its own storage version or the one before (an upgrade is one minor at a time, and since
// 3.6 a binary downgrade on the same data is refused: etcd's downgrade process lowers the storage
// version first). Between a member's old Pod and its new one, the version its data was last
// written by (EtcdMember status.dataVersion) is the only evidence of what it runs.

// dataVersion is the version m's data was last written by: what its etcd reports while it
// answers (current, and ahead of any record), else what was recorded while it last ran.
func (m *memberView) dataVersion() *stewardv1.DataVersion {
	if m.ep != nil && m.ep.Reachable && m.ep.Version != "" {
		return &stewardv1.DataVersion{Server: m.ep.Version, Storage: m.ep.StorageVersion}
	}
	return m.DataVersion
}

// dataVersions are what a data version holds the next etcd to, as versionRefusal's sources: the
// server that last wrote it (nothing older: a downgrade; nothing two minors newer) and its storage
// version. Data without a storage version is etcd 3.5's or older: 3.4 and 3.5 write none, and 3.6
// writes one only once the cluster version is 3.6, so a 3.6 server on it says no more than 3.5.
func dataVersions(d *stewardv1.DataVersion) []runningVersion {
	if d == nil {
		return nil
	}
	var out []runningVersion
	if d.Server != "" {
		out = append(out, runningVersion{d.Server, "has data last written by etcd", true})
	}
	if s := d.Storage; s != "" {
		s = storageFull(s) // "3.6": etcd writes major.minor.0, but a major.minor is as clear
		return append(out, runningVersion{version: s, source: "has data of storage version"})
	}
	if v, ok := parseVersion(d.Server); ok && (v[0] > 3 || v[0] == 3 && v[1] > 5) {
		out = append(out, runningVersion{version: "3.5.0", source: "has data with no storage version (etcd 3.5's or older), read as"})
	}
	return out
}

// dataRefusal says why m's etcd could not start on its data at the target version, or "" when it
// can (or nothing is known of the data). A Pod is never built onto such data: it would crash-loop,
// and the member would count as down for nothing a rebuild can fix.
func (v *view) dataRefusal(m *memberView) string {
	want := v.target.Version
	d := m.dataVersion()
	for _, r := range dataVersions(d) {
		s := ClassifyVersion(r.version, want)
		if s == StepDowngrade && r.server && d.Storage != "" {
			continue // the storage version binds an older etcd (lowered by etcd's downgrade protocol)
		}
		if !s.Allowed() {
			return fmt.Sprintf("%s is not rebuilt on etcd %s: it %s %s (%s), which etcd %s cannot start on; "+
				"set spec.version to one at most one minor above its data's and not below it", m.Name, want, r.source,
				r.version, s, want)
		}
	}
	return ""
}

// versionRefused handles a member whose etcd the data check refused for its version (internal/
// datacheck): its data is intact, so it is never replaced. A corrected target rolls it (roll takes
// it first, as unavailable); while the target is the one refused, nothing can fix it but the user.
func (v *view) versionRefused(m *memberView) (Action, bool) {
	if m.Pod.VersionRefused == "" || !m.Pod.Exists || m.change.Has(ChangeRoll) {
		return Action{}, false
	}
	return wait(ReasonVersionStepRefused, "%s's etcd refused to start on its data (%s); its data is kept: set spec.version "+
		"to one its data accepts", m.Name, m.Pod.VersionRefused), true
}

// memberDataVersions are Decision.DataVersions: each member's data version, by name, where known.
func (v *view) memberDataVersions() map[string]*stewardv1.DataVersion {
	out := map[string]*stewardv1.DataVersion{}
	for _, m := range v.members {
		if d := m.dataVersion(); d != nil {
			out[m.Name] = d
		}
	}
	return out
}
