package kubectletcd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
)

// printObject writes v as indented JSON or YAML; the field order is the struct's, so output is
// stable enough for golden files and diffs.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q: use json or yaml", format)
}

// RenderStatus writes the one-screen text view. now makes expiries and ages relative.
func RenderStatus(w io.Writer, s Status, now time.Time) error {
	b := &strings.Builder{}
	kv := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	line := func(k, format string, a ...any) {
		_, _ = fmt.Fprintf(kv, "%s:\t"+format+"\n", append([]any{k}, a...)...)
	}

	line("Cluster", "%s/%s (etcd %s, cluster ID %s)", s.Namespace, s.Cluster, s.Version, or(s.ClusterID, "not formed"))
	avail := s.Available
	if c := condition(s.Conds, "Available"); c != nil {
		avail += " (" + c.Reason + ": " + c.Message + ")"
	}
	line("Available", "%s", avail)
	if s.QuorumLost {
		line("QUORUM LOST", "etcd cannot take writes; commands that reach etcd will refuse; see the recovery plan below")
	}
	if s.MembersUnreachable {
		line("MEMBERS UNREACHABLE", "the operator cannot reach members (see Available); etcd may still serve its clients; "+
			"no recovery runs on that alone")
	}
	line("Members", "%d/%d ready, %d/%d updated, %d desired (template %s)", s.ReadyMembers, s.Replicas, s.UpdatedMembers,
		s.Replicas, s.Desired, or(s.Template, "-"))
	line("Leader", "%s", or(s.Leader, "none"))
	paused := "no"
	if s.Paused {
		paused = "yes: no roll or scale step runs (kubectl etcd resume " + s.Cluster + ")"
	}
	line("Paused", "%s", paused)
	adoptionLines(line, s.Adoption)
	if r := s.Rollout; r != nil {
		parts := []string{}
		if r.Pass != "" {
			parts = append(parts, "pass "+r.Pass)
		}
		if r.Member != "" {
			parts = append(parts, "rolling "+r.Member)
		}
		if len(r.Pending) > 0 {
			parts = append(parts, "pending "+strings.Join(r.Pending, ", "))
		}
		if r.WaitingFor != "" {
			parts = append(parts, "waiting: "+r.WaitingFor)
		}
		line("Rollout", "%s", strings.Join(parts, "; "))
	}
	if st := s.Step; st != nil {
		line("Step", "%s since %s (%s)", st.Action, stamp(st.Since.Time), age(now, st.Since.Time))
	}
	_ = kv.Flush()
	b.WriteString("\n")

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "MEMBER\tROLE\tREADY\tVERSION\tUPDATED\tPHASE\tDB SIZE\tIN USE\tQUOTA\tUSED\tALARMS\tLAST DEFRAG")
	for _, m := range s.Members {
		used := "-"
		if m.QuotaUsedPercent != nil {
			used = fmt.Sprintf("%d%%", *m.QuotaUsedPercent)
		}
		defrag := "-"
		switch {
		case m.Defragmenting != nil:
			defrag = "running since " + stamp(m.Defragmenting.Time)
		case m.Defrag != nil:
			defrag = fmt.Sprintf("%s %s (%s)", m.Defrag.Outcome, age(now, m.Defrag.Time.Time), or(m.Defrag.Trigger, "?"))
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Role, yesNo(m.Ready),
			or(m.Version, "-"), yesNo(m.Updated), or(m.Phase, "-"), size(m.DBSize), size(m.DBSizeInUse), size(m.Quota),
			used, or(strings.Join(m.Alarms, ","), "-"), defrag)
	}
	_ = tw.Flush()
	if len(s.Live) > 0 {
		b.WriteString("\n")
		lw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprintln(lw, "LIVE\tLEADER\tTERM\tRAFT INDEX\tAPPLIED\tREVISION\tDB SIZE\tERROR")
		for _, l := range s.Live {
			_, _ = fmt.Fprintf(lw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", l.Name, or(l.Leader, "-"), l.Term, l.Index, l.Applied,
				l.Revision, size(l.DBSize), or(l.Error, "-"))
		}
		_ = lw.Flush()
	}
	b.WriteString("\n")

	kv = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	alarms := "none"
	if len(s.Alarms) > 0 {
		var as []string
		for _, a := range s.Alarms {
			as = append(as, a.Alarm+" on "+a.Member)
		}
		alarms = strings.Join(as, ", ")
	}
	line("Alarms", "%s", alarms)
	line("Certificates", "%s", certLine(s.TLS, now))
	if d := s.TLS.DropOldCA; d != nil {
		line("CA rotation", "waiting for clients until %s: %s", stamp(d.After.Time), d.Message)
	}
	line("Last backup", "%s", backupLine(s.Backup.LastSuccessful, now))
	for _, it := range s.Backup.Recent {
		if s.Backup.LastSuccessful != nil && it.Name == s.Backup.LastSuccessful.Name {
			continue
		}
		msg := ""
		if it.Message != "" {
			msg = ": " + it.Message
		}
		line("  other", "%s %s %s%s", it.Name, it.Phase, age(now, it.Time.Time), msg)
	}
	if c := s.Backup.Continuous; c != nil {
		line("Continuous", "%s", continuousLine(c, now))
		if d := c.LastDrill; d != nil {
			line("  last drill", "%s", drillLine(d, now))
		}
	}
	if r := s.Restore; r != nil {
		line("Restored from", "%s (revision %d)", r.Source, r.Revision)
	}
	if d := s.Downgrade; d != nil {
		line("Downgrade", "%s", downgradeLine(d, now))
	}
	if q := s.Quorum; q != nil {
		quorumLines(line, q, now)
	}
	_ = kv.Flush()
	b.WriteString("\nConditions:\n")
	cw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, c := range s.Conds {
		_, _ = fmt.Fprintf(cw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = cw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

func quorumLines(line func(k, format string, a ...any), q *QuorumView, now time.Time) {
	if q.LostSince != nil {
		line("Quorum lost", "since %s (%s), policy %s", stamp(q.LostSince.Time), age(now, q.LostSince.Time), q.Policy)
	}
	if p := q.Plan; p != nil {
		switch {
		case p.Refused != "":
			line("Recovery plan", "refused: %s", p.Refused)
		case p.RestoreFrom != "":
			line("Recovery plan", "restore from backup %s; lost: %s", p.RestoreFrom, or(p.Loss, "writes after the backup"))
		default:
			line("Recovery plan", "survivor %s (raft index %d, revision %d), discard %s; lost: %s", p.Survivor, p.RaftIndex,
				p.Revision, or(strings.Join(p.Discarded, ", "), "none"), or(p.Loss, "nothing"))
		}
	}
	if q.Requested != "" {
		line("Recovery", "requested (%s)", q.Requested)
	}
	if p := q.InProgress; p != nil {
		line("Recovery", "in progress: stage %s since %s (survivor %s)", p.Stage, stamp(p.Since.Time), or(p.Survivor, p.RestoreFrom))
	}
	if l := q.Last; l != nil {
		line("Last recovery", "%s from %s at revision %d (%s)", stamp(l.Time.Time), or(l.Survivor, l.RestoreFrom), l.Revision, l.Trigger)
	}
}

func certLine(t TLSView, now time.Time) string {
	if !t.Enabled {
		return "TLS off"
	}
	var parts []string
	if t.CANotAfter != nil {
		parts = append(parts, fmt.Sprintf("CA expires %s (%s)", stamp(t.CANotAfter.Time), age(now, t.CANotAfter.Time)))
	}
	if n := t.NextExpiry; n != nil {
		parts = append(parts, fmt.Sprintf("first leaf to expire %s on %s (%s)", n.Name, stamp(n.NotAfter.Time), age(now, n.NotAfter.Time)))
	}
	if t.Rotation != "" {
		parts = append(parts, "CA rotation pass "+t.Rotation)
	}
	if len(parts) == 0 {
		return "not issued yet"
	}
	return strings.Join(parts, "; ")
}

func backupLine(b *BackupItem, now time.Time) string {
	if b == nil {
		return "none"
	}
	s := b.Name
	if b.Time != nil {
		s += fmt.Sprintf(" at %s (%s)", stamp(b.Time.Time), age(now, b.Time.Time))
	}
	if b.Revision != 0 {
		s += fmt.Sprintf(", revision %d", b.Revision)
	}
	if b.Size != 0 {
		s += ", " + size(b.Size)
	}
	if b.Verified != nil {
		s += ", verified " + yesNo(*b.Verified)
	}
	return s
}

func continuousLine(c *stewardv1.ContinuousSummary, now time.Time) string {
	s := fmt.Sprintf("schedule %s, durable revision %d", c.Schedule, c.DurableRevision)
	if c.DurableTime != nil {
		s += fmt.Sprintf(" (%s)", age(now, c.DurableTime.Time))
	}
	s += fmt.Sprintf(", %d revisions behind", c.LagRevisions)
	if c.ReportedAt != nil {
		s += fmt.Sprintf(", streamer heard from %s", age(now, c.ReportedAt.Time))
	}
	return s
}

func drillLine(d *stewardv1.ChainDrill, now time.Time) string {
	s := fmt.Sprintf("revision %d %s, passed %s", d.Revision, age(now, d.Time.Time), yesNo(d.Verified))
	if !d.Verified && d.Message != "" {
		s += ": " + d.Message
	}
	return s
}

func condition(cs []ConditionView, typ string) *ConditionView {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// size prints bytes in binary units with one decimal, like etcdctl's table.
func size(n int64) string {
	if n <= 0 {
		return "-"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}

// downgradeLine is status.downgrade in one line: from, to, stage, since, the backup taken first.
func downgradeLine(d *stewardv1.DowngradeStatus, now time.Time) string {
	out := fmt.Sprintf("%s -> %s: %s (started %s)", d.From, d.Target, d.Stage, age(now, d.StartedAt.Time))
	if d.FinishedAt != nil {
		out += ", finished " + age(now, d.FinishedAt.Time)
	}
	if d.Backup != "" {
		out += "; backup " + d.Backup
	}
	if d.Stage.Active() && d.Message != "" {
		out += "; " + d.Message
	}
	return out
}
