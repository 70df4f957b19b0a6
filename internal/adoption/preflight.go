package adoption

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// Check names, in the order the preflight runs them.
const (
	CheckSourceCA    = "SourceCA"
	CheckAuth        = "Auth"
	CheckReachable   = "Reachable"
	CheckNoLearner   = "NoLearner"
	CheckHealthy     = "Healthy"
	CheckNoAlarm     = "NoAlarm"
	CheckVersion     = "Version"
	CheckPeerScheme  = "PeerScheme"
	CheckQuota       = "Quota"
	CheckNames       = "Names"
	CheckStatefulSet = "StatefulSet"
)

// Source is what the controller read of the running cluster, live, before anything changes.
type Source struct {
	// Etcd is the member list and every source member's status, each endpoint named SourceName.
	Etcd health.Facts
	// Names are the source members' endpoint names in Etcd.Endpoints, by member ID.
	Names map[uint64]string
	// AuthEnabled is etcd's AuthStatus; AuthErr says why it could not be read.
	AuthEnabled bool
	AuthErr     string
	// StatefulSet is the named StatefulSet (spec.bootstrap.join.statefulSetName); nil when none is
	// named.
	StatefulSet *StatefulSet
	// CA is the source's CA as taken from spec.bootstrap.join.caSecretName; zero for a plaintext
	// source.
	CA CA
	// SeedErr is why the first of spec.bootstrap.join.endpoints did not answer a status read, when
	// the member list could not be read: the member list's own error hides a failed TLS handshake
	// behind its timeout.
	SeedErr string
}

// CA is the source's CA Steward issues its certificates from (a TLS source).
type CA struct {
	// Secret is spec.bootstrap.join.caSecretName; empty for a plaintext source.
	Secret string
	// Subject and NotAfter (RFC 3339) name the CA taken, for the user to confirm it is the source's.
	Subject, NotAfter string
	// Err says why it could not be taken (the Secret missing, no key, not a CA); empty when it was.
	Err string
}

// StatefulSet is what the preflight needs of the source's StatefulSet.
type StatefulSet struct {
	Name string
	// Found is false when no StatefulSet of that name exists.
	Found    bool
	Replicas int32
	// Pods are its Pods' names.
	Pods []string
	// PreStop: its etcd container has a preStop hook (the Bitnami chart's removes the member from
	// the cluster when the container stops, which would remove members behind Steward's back).
	PreStop bool
}

// Target is what Steward will run.
type Target struct {
	// Version is spec.version.
	Version string
	// PeerScheme is http or https (spec.tls.enabled).
	PeerScheme string
	// QuotaBytes is the backend quota Steward's members get (spec.options.quotaBackendBytes, or
	// etcd's default of 2 GiB).
	QuotaBytes int64
	// MemberNames are the names Steward's members may take.
	MemberNames []string
	// TakenServices are Services Steward must create that exist and are not its own.
	TakenServices []string
}

// DefaultQuotaBytes is etcd's default backend quota.
const DefaultQuotaBytes int64 = 2 << 30

// Preflight runs every check in order; the adoption may start only when all passed. Auth comes
// first: etcd answers AuthStatus without credentials, and with auth on, the member list itself is
// refused, which would otherwise read as an unreachable source.
func Preflight(s Source, t Target) []stewardv1.AdoptionCheck {
	ca := sourceCA(s)
	if !ca.Passed {
		return []stewardv1.AdoptionCheck{ca} // without it the operator holds no certificate the source trusts
	}
	checks := []stewardv1.AdoptionCheck{ca, auth(s), reachable(s)}
	if !checks[2].Passed {
		if s.AuthErr != "" {
			// The auth status could not be read either: the source did not answer at all, and
			// Reachable says why; an Auth failure first would hide it.
			checks[1], checks[2] = checks[2], checks[1]
		}
		return checks // nothing else can be judged without the member list
	}
	return append(checks, noLearner(s), healthy(s), noAlarm(s), version(s, t), peerScheme(s, t),
		quota(s, t), names(s, t), statefulSet(s))
}

// Passed says whether every check passed; the first failure's message otherwise.
func Passed(checks []stewardv1.AdoptionCheck) (bool, string) {
	if len(checks) == 0 {
		return false, "the preflight has not run"
	}
	for _, c := range checks {
		if !c.Passed {
			return false, c.Name + ": " + c.Message
		}
	}
	return true, ""
}

func pass(name, format string, args ...any) stewardv1.AdoptionCheck {
	return stewardv1.AdoptionCheck{Name: name, Passed: true, Message: fmt.Sprintf(format, args...)}
}

func fail(name, format string, args ...any) stewardv1.AdoptionCheck {
	return stewardv1.AdoptionCheck{Name: name, Message: fmt.Sprintf(format, args...)}
}

// sourceCA: a TLS source is adopted with its own CA, so that every certificate Steward issues is
// one the source's members and clients already trust, and theirs are ones Steward's members trust.
func sourceCA(s Source) stewardv1.AdoptionCheck {
	switch {
	case s.CA.Secret == "":
		return pass(CheckSourceCA, "plaintext source: no CA to take")
	case s.CA.Err != "":
		return fail(CheckSourceCA, "the source's CA (Secret %s, spec.bootstrap.join.caSecretName): %s. Put the CA certificate "+
			"and key the source's certificates chain to in it (kubectl create secret tls %s --cert=ca.crt --key=ca.key)",
			s.CA.Secret, s.CA.Err, s.CA.Secret)
	}
	return pass(CheckSourceCA, "Steward issues its certificates from the source's CA %s (Secret %s, valid until %s)",
		s.CA.Subject, s.CA.Secret, s.CA.NotAfter)
}

func reachable(s Source) stewardv1.AdoptionCheck {
	if !s.Etcd.MemberListKnown() {
		why := s.Etcd.MemberListErr
		if s.SeedErr != "" {
			why += "; the first endpoint: " + s.SeedErr
		}
		if s.CA.Secret != "" && strings.Contains(s.SeedErr, "certificate signed by unknown authority") {
			return fail(CheckReachable, "the source's server certificate does not chain to the CA in Secret %s (%s): give "+
				"the CA the source's certificates were issued by. A source running --auto-tls has certificates etcd made "+
				"itself, which no CA signs, and cannot be adopted", s.CA.Secret, why)
		}
		return fail(CheckReachable, "the source's member list could not be read through spec.bootstrap.join.endpoints (%s): "+
			"check the URLs, that the source has quorum, and that Steward's namespace can reach them", why)
	}
	return pass(CheckReachable, "%d members", len(s.Etcd.Members))
}

func noLearner(s Source) stewardv1.AdoptionCheck {
	for _, m := range s.Etcd.Members {
		if m.IsLearner {
			name := m.Name
			if name == "" {
				name = "not started yet, peer URLs " + strings.Join(m.PeerURLs, ",")
			}
			return fail(CheckNoLearner, "member %x (%s) is a learner: promote it or remove it (etcdctl member promote|remove %x) first",
				m.ID, name, m.ID)
		}
	}
	return pass(CheckNoLearner, "no learner")
}

func healthy(s Source) stewardv1.AdoptionCheck {
	leader, ok := s.Etcd.Leader()
	if !ok {
		return fail(CheckHealthy, "no member reports a leader")
	}
	for _, m := range s.Etcd.Members {
		ep, ok := s.Etcd.Endpoint(s.Names[m.ID])
		switch {
		case !ok || !ep.Reachable:
			return fail(CheckHealthy, "member %s did not answer at its client URL (%s): every source member must be healthy first",
				m.Name, ep.Err)
		case !ep.Healthy || len(ep.Errors) > 0:
			return fail(CheckHealthy, "member %s is not healthy (%s): repair it first", m.Name, strings.Join(ep.Errors, ", "))
		case ep.LeaderID != leader:
			return fail(CheckHealthy, "member %s follows leader %x, others %x: wait until the source settles", m.Name, ep.LeaderID, leader)
		}
	}
	return pass(CheckHealthy, "every member healthy, leader %x", leader)
}

func noAlarm(s Source) stewardv1.AdoptionCheck {
	if len(s.Etcd.Alarms) > 0 {
		return fail(CheckNoAlarm, "%s: clear it first (etcdctl alarm list; alarm disarm once resolved)", s.Etcd.AlarmMessage())
	}
	return pass(CheckNoAlarm, "no alarm")
}

func auth(s Source) stewardv1.AdoptionCheck {
	switch {
	case s.AuthErr != "":
		return fail(CheckAuth, "the source's auth status could not be read: %s", s.AuthErr)
	case s.AuthEnabled:
		return fail(CheckAuth, "etcd authentication is enabled on the source (the Bitnami chart's default): Steward cannot "+
			"adopt a source with auth yet; nothing was changed")
	}
	return pass(CheckAuth, "authentication disabled")
}

// version: Steward's members join at the source's minor (etcd supports mixed patch versions, not
// mixed minors during a hand-over); an upgrade is an ordinary roll afterwards.
func version(s Source, t Target) stewardv1.AdoptionCheck {
	var versions []string
	for _, ep := range s.Etcd.Endpoints {
		if ep.Version != "" && !slices.Contains(versions, ep.Version) {
			versions = append(versions, ep.Version)
		}
	}
	if len(versions) == 0 {
		return fail(CheckVersion, "no source member reported its version")
	}
	slices.Sort(versions)
	want := minor(t.Version)
	for _, v := range versions {
		switch got := minor(v); {
		case got == "":
			return fail(CheckVersion, "the source runs etcd %s, which Steward cannot parse", v)
		case semver.Compare("v"+got, "v3.5") < 0:
			return fail(CheckVersion, "the source runs etcd %s: Steward runs 3.5 and later; upgrade the source to 3.5 first, "+
				"then adopt it", v)
		case got != want:
			return fail(CheckVersion, "the source runs etcd %s and spec.version is %s: set spec.version to the source's "+
				"version (%s.x), adopt, then upgrade with an ordinary version change", v, t.Version, got)
		}
	}
	return pass(CheckVersion, "source %s, Steward %s", strings.Join(versions, ", "), t.Version)
}

// minor is "3.6" of "3.6.16" or "v3.6.0-rc.1"; "" when unparseable.
func minor(v string) string {
	v = "v" + strings.TrimPrefix(v, "v")
	if !semver.IsValid(v) {
		return ""
	}
	return strings.TrimPrefix(semver.MajorMinor(v), "v")
}

// peerScheme: Steward's members' peers use what the source's do (spec.tls.peer.enabled false for
// plaintext peers beside TLS clients), since both kinds are in one cluster while it hands over.
func peerScheme(s Source, t Target) stewardv1.AdoptionCheck {
	for _, m := range s.Etcd.Members {
		for _, u := range m.PeerURLs {
			switch {
			case strings.HasPrefix(u, t.PeerScheme+"://"):
			case t.PeerScheme == "https":
				return fail(CheckPeerScheme, "member %s's peer URL %s is plaintext while Steward's members would use TLS on "+
					"both planes: for a source with TLS clients and plaintext peers set spec.tls.peer.enabled to false "+
					"(fixed at creation: recreate the EtcdCluster)", m.Name, u)
			case s.CA.Secret != "":
				return fail(CheckPeerScheme, "member %s's peer URL %s uses TLS while spec.tls.peer.enabled is false: "+
					"leave it at its default (true) for a source with TLS on both planes (fixed at creation: recreate "+
					"the EtcdCluster)", m.Name, u)
			default:
				return fail(CheckPeerScheme, "member %s's peer URL %s uses TLS: adopt a TLS source with https:// endpoints "+
					"and spec.bootstrap.join.caSecretName (its CA), spec.tls left enabled", m.Name, u)
			}
		}
	}
	return pass(CheckPeerScheme, "peers use %s", t.PeerScheme)
}

// quota: a Steward member with a smaller quota than the data would raise NOSPACE for the whole
// cluster the moment it joined.
func quota(s Source, t Target) stewardv1.AdoptionCheck {
	var quota, size int64
	for _, ep := range s.Etcd.Endpoints {
		quota, size = max(quota, ep.DBSizeQuota), max(size, ep.DBSize)
	}
	need := max(quota, size)
	if t.QuotaBytes < need {
		what := "the source's database size"
		if quota >= size {
			what = "the source's quota"
		}
		return fail(CheckQuota, "Steward's members would get a backend quota of %s, below %s (%s): set "+
			"spec.options.quotaBackendBytes to at least %s", human(t.QuotaBytes), what, human(need), strconv.FormatInt(need, 10))
	}
	return pass(CheckQuota, "quota %s, source database %s, source quota %s", human(t.QuotaBytes), human(size), human(quota))
}

func human(b int64) string {
	const mi = 1 << 20
	return fmt.Sprintf("%.1f MiB", float64(b)/mi)
}

func names(s Source, t Target) stewardv1.AdoptionCheck {
	for _, m := range s.Etcd.Members {
		if slices.Contains(t.MemberNames, m.Name) {
			return fail(CheckNames, "source member %s has a name Steward's members would take: name the EtcdCluster "+
				"differently (Steward names members <cluster>-<ordinal>)", m.Name)
		}
	}
	if len(t.TakenServices) > 0 {
		return fail(CheckNames, "Service %s exists and is not this cluster's: name the EtcdCluster differently (Steward "+
			"creates Services <cluster> and <cluster>-client)", strings.Join(t.TakenServices, ", "))
	}
	return pass(CheckNames, "no name clash")
}

// statefulSet: every Pod of the named StatefulSet runs exactly one source member, matched by peer
// URL, and every source member is run by one, so scaling down by one stops exactly the member
// removed last.
func statefulSet(s Source) stewardv1.AdoptionCheck {
	set := s.StatefulSet
	if set == nil {
		return pass(CheckStatefulSet, "none named: removed source members are reported for their owner to stop")
	}
	switch {
	case !set.Found:
		return fail(CheckStatefulSet, "StatefulSet %s (spec.bootstrap.join.statefulSetName) was not found in this namespace", set.Name)
	case set.PreStop:
		return fail(CheckStatefulSet, "StatefulSet %s's etcd container has a preStop hook: the Bitnami chart's removes the "+
			"member from etcd when its Pod stops, behind Steward's back. Disable it first (Bitnami: "+
			"removeMemberOnContainerTermination=false, then let the StatefulSet roll)", set.Name)
	case int(set.Replicas) != len(s.Etcd.Members):
		return fail(CheckStatefulSet, "StatefulSet %s has %d replicas and the cluster %d members: every member must be "+
			"one of its Pods", set.Name, set.Replicas, len(s.Etcd.Members))
	}
	matched := map[string]bool{}
	for _, m := range s.Etcd.Members {
		pod := ""
		for _, u := range m.PeerURLs {
			if pod = PodOf(u, set.Pods); pod != "" {
				break
			}
		}
		if pod == "" || matched[pod] {
			return fail(CheckStatefulSet, "member %s (peer URLs %s) is not run by one Pod of StatefulSet %s", m.Name,
				strings.Join(m.PeerURLs, ","), set.Name)
		}
		matched[pod] = true
	}
	return pass(CheckStatefulSet, "StatefulSet %s runs every member (%d Pods)", set.Name, len(matched))
}
