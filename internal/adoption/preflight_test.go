package adoption

import (
	"fmt"
	"strings"
	"testing"

	stewardv1 "github.com/etcd-steward/steward/api/v1alpha1"
	"github.com/etcd-steward/steward/internal/health"
)

// source is a healthy 3-member 3.6 source run by StatefulSet etcd, plaintext peers.
func source() Source {
	s := Source{Names: map[uint64]string{}, StatefulSet: &StatefulSet{Name: "etcd", Found: true, Replicas: 3,
		Pods: []string{"etcd-0", "etcd-1", "etcd-2"}}}
	for i := range 3 {
		id := uint64(0xa0 + i)
		name := fmt.Sprintf("etcd-%d", i)
		s.Etcd.Members = append(s.Etcd.Members, health.Member{ID: id, Name: name,
			PeerURLs: []string{fmt.Sprintf("http://%s.etcd-headless.ns.svc.cluster.local:2380", name)}})
		s.Names[id] = "source-" + name
		s.Etcd.Endpoints = append(s.Etcd.Endpoints, health.Endpoint{Member: "source-" + name, Reachable: true, Healthy: true,
			MemberID: id, LeaderID: 0xa0, Version: "3.6.16", DBSize: 20 << 20, DBSizeQuota: 2 << 30, ReadOK: true})
	}
	return s
}

func target() Target {
	return Target{Version: "3.6.16", PeerScheme: "http", QuotaBytes: DefaultQuotaBytes,
		MemberNames: []string{"adopted-0", "adopted-1", "adopted-2", "adopted-3"}}
}

func firstFailure(checks []stewardv1.AdoptionCheck) (string, string) {
	for _, c := range checks {
		if !c.Passed {
			return c.Name, c.Message
		}
	}
	return "", ""
}

func TestPreflight(t *testing.T) {
	cases := []struct {
		name       string
		source     func(*Source)
		target     func(*Target)
		check, msg string // "" = every check passes
	}{
		{name: "healthy source"},
		{name: "no StatefulSet named", source: func(s *Source) { s.StatefulSet = nil }},
		{name: "3.5 source, 3.5 target", source: func(s *Source) { setVersion(s, "3.5.21") }, target: func(t *Target) { t.Version = "3.5.21" }},
		{name: "newer patch on Steward's side", target: func(t *Target) { t.Version = "3.6.17" }},
		{name: "unreachable", source: func(s *Source) { s.Etcd.MemberListErr = "context deadline exceeded" },
			check: CheckReachable, msg: "could not be read through spec.bootstrap.join.endpoints"},
		{name: "unreachable, the first endpoint says why", source: func(s *Source) {
			s.Etcd.MemberListErr, s.SeedErr = "context deadline exceeded", "connection refused"
		}, check: CheckReachable, msg: "(context deadline exceeded; the first endpoint: connection refused): check the URLs"},
		// The member list only times out; the handshake's error is the endpoint's.
		{name: "server certificate of another CA (--auto-tls)", source: func(s *Source) {
			s.CA = CA{Secret: "source-ca", Subject: "CN=etcd-ca"}
			s.Etcd.MemberListErr = "member list: context deadline exceeded"
			s.SeedErr = `connection error: desc = "transport: authentication handshake failed: x509: certificate signed by unknown authority"`
		}, check: CheckReachable, msg: "does not chain to the CA in Secret source-ca"},
		{name: "a plaintext source's unknown authority is no CA mismatch", source: func(s *Source) {
			s.Etcd.MemberListErr, s.SeedErr = "context deadline exceeded", "x509: certificate signed by unknown authority"
		}, check: CheckReachable, msg: "check the URLs"},
		{name: "a learner", source: func(s *Source) { s.Etcd.Members[2].IsLearner = true },
			check: CheckNoLearner, msg: "is a learner: promote it or remove it"},
		{name: "a learner not started yet has no name: its peer URL names it", source: func(s *Source) {
			s.Etcd.Members[2].IsLearner, s.Etcd.Members[2].Name = true, ""
		}, check: CheckNoLearner, msg: "(not started yet, peer URLs http://etcd-2.etcd-headless.ns.svc.cluster.local:2380) is a learner"},
		{name: "a member down", source: func(s *Source) { s.Etcd.Endpoints[1] = health.Endpoint{Member: "source-etcd-1", Err: "refused"} },
			check: CheckHealthy, msg: "member etcd-1 did not answer"},
		{name: "a member reporting an error", source: func(s *Source) { s.Etcd.Endpoints[1].Errors = []string{"etcdserver: no leader"} },
			check: CheckHealthy, msg: "etcd-1 is not healthy (etcdserver: no leader)"},
		{name: "no leader", source: func(s *Source) {
			for i := range s.Etcd.Endpoints {
				s.Etcd.Endpoints[i].LeaderID = 0
			}
		}, check: CheckHealthy, msg: "no member reports a leader"},
		{name: "an alarm", source: func(s *Source) { s.Etcd.Alarms = []health.Alarm{{MemberID: 0xa1, Type: health.AlarmNoSpace}} },
			check: CheckNoAlarm, msg: "NOSPACE"},
		{name: "auth enabled", source: func(s *Source) { s.AuthEnabled = true },
			check: CheckAuth, msg: "authentication is enabled"},
		{name: "auth status unreadable", source: func(s *Source) { s.AuthErr = "timeout" },
			check: CheckAuth, msg: "could not be read: timeout"},
		{name: "auth on: the member list is refused too, auth is what the user reads", source: func(s *Source) {
			s.AuthEnabled, s.Etcd.MemberListErr = true, "etcdserver: user name is empty"
		}, check: CheckAuth, msg: "authentication is enabled"},
		{name: "3.4 source", source: func(s *Source) { setVersion(s, "3.4.30") }, target: func(t *Target) { t.Version = "3.5.21" },
			check: CheckVersion, msg: "upgrade the source to 3.5 first"},
		{name: "target a minor ahead", target: func(t *Target) { t.Version = "3.7.0" },
			check: CheckVersion, msg: "set spec.version to the source's version (3.6.x)"},
		{name: "target a minor behind", source: func(s *Source) { setVersion(s, "3.6.16") }, target: func(t *Target) { t.Version = "3.5.21" },
			check: CheckVersion, msg: "set spec.version to the source's version (3.6.x)"},
		{name: "mixed source minors", source: func(s *Source) { s.Etcd.Endpoints[0].Version = "3.5.21" },
			check: CheckVersion, msg: "the source runs etcd 3.5.21"},
		{name: "TLS peers, plaintext Steward", source: func(s *Source) {
			s.Etcd.Members[0].PeerURLs = []string{"https://etcd-0.etcd-headless.ns.svc:2380"}
		}, check: CheckPeerScheme, msg: "adopt a TLS source with https:// endpoints and spec.bootstrap.join.caSecretName"},
		{name: "source quota above Steward's", source: func(s *Source) { s.Etcd.Endpoints[0].DBSizeQuota = 8 << 30 },
			check: CheckQuota, msg: "below the source's quota (8192.0 MiB): set spec.options.quotaBackendBytes to at least 8589934592"},
		{name: "3.5 source (no quota reported) larger than Steward's quota", source: func(s *Source) {
			for i := range s.Etcd.Endpoints {
				s.Etcd.Endpoints[i].DBSizeQuota = 0
			}
			s.Etcd.Endpoints[2].DBSize = 3 << 30
		}, check: CheckQuota, msg: "below the source's database size"},
		{name: "a source member named like Steward's", source: func(s *Source) { s.Etcd.Members[0].Name = "adopted-3" },
			check: CheckNames, msg: "source member adopted-3 has a name Steward's members would take"},
		{name: "a Service taken", target: func(t *Target) { t.TakenServices = []string{"adopted-client"} },
			check: CheckNames, msg: "Service adopted-client exists and is not this cluster's"},
		{name: "StatefulSet missing", source: func(s *Source) { s.StatefulSet.Found = false },
			check: CheckStatefulSet, msg: "was not found"},
		{name: "Bitnami preStop hook", source: func(s *Source) { s.StatefulSet.PreStop = true },
			check: CheckStatefulSet, msg: "removeMemberOnContainerTermination=false"},
		{name: "StatefulSet size differs", source: func(s *Source) { s.StatefulSet.Replicas = 4 },
			check: CheckStatefulSet, msg: "has 4 replicas and the cluster 3 members"},
		{name: "a member outside the StatefulSet", source: func(s *Source) {
			s.Etcd.Members[2].PeerURLs = []string{"http://vm-7.example.com:2380"}
		}, check: CheckStatefulSet, msg: "member etcd-2 (peer URLs http://vm-7.example.com:2380) is not run by one Pod"},
		{name: "two members on one Pod", source: func(s *Source) {
			s.Etcd.Members[2].PeerURLs = s.Etcd.Members[1].PeerURLs
		}, check: CheckStatefulSet, msg: "is not run by one Pod"},
		// The boundaries of each check, where an off-by-one would pass what must be refused.
		{name: "quota exactly the source's", source: func(s *Source) { s.Etcd.Endpoints[1].DBSizeQuota = DefaultQuotaBytes }},
		{name: "quota a byte below the source's", source: func(s *Source) { s.Etcd.Endpoints[1].DBSizeQuota = DefaultQuotaBytes + 1 },
			check: CheckQuota, msg: "at least 2147483649"},
		{name: "quota a byte below the database (3.5 reports no quota)", source: func(s *Source) {
			for i := range s.Etcd.Endpoints {
				s.Etcd.Endpoints[i].DBSizeQuota = 0
			}
		}, target: func(t *Target) { t.QuotaBytes = 20<<20 - 1 }, check: CheckQuota, msg: "below the source's database size"},
		{name: "a leading v and a pre-release", source: func(s *Source) { setVersion(s, "v3.6.0-rc.1") }},
		{name: "a custom build's version", source: func(s *Source) { setVersion(s, "custom") },
			check: CheckVersion, msg: "which Steward cannot parse"},
		{name: "no version reported", source: func(s *Source) { setVersion(s, "") },
			check: CheckVersion, msg: "no source member reported its version"},
		{name: "a member following another leader", source: func(s *Source) { s.Etcd.Endpoints[2].LeaderID = 0xa1 },
			check: CheckHealthy, msg: "follows leader a1, others a0: wait until the source settles"},
		{name: "a StatefulSet with the right size but no Pods", source: func(s *Source) { s.StatefulSet.Pods = nil },
			check: CheckStatefulSet, msg: "is not run by one Pod of StatefulSet etcd"},
		{name: "a second peer URL names the Pod", source: func(s *Source) {
			s.Etcd.Members[0].PeerURLs = []string{"http://10.0.0.7:2380", s.Etcd.Members[0].PeerURLs[0]}
		}},
		{name: "every peer URL must use the scheme", source: func(s *Source) {
			s.Etcd.Members[0].PeerURLs = append(s.Etcd.Members[0].PeerURLs, "https://10.0.0.7:2380")
		}, check: CheckPeerScheme, msg: "https://10.0.0.7:2380 uses TLS: adopt a TLS source with https:// endpoints and spec.bootstrap.join.caSecretName"},
		{name: "TLS source", source: tlsSource, target: tlsTarget},
		{name: "TLS clients, plaintext peers", source: func(s *Source) { s.CA = CA{Secret: "src-ca", Subject: "CN=src"} },
			target: tlsTarget, check: CheckPeerScheme, msg: "for a source with TLS clients and plaintext peers set spec.tls.peer.enabled to false"},
		{name: "TLS clients, plaintext peers, adopted so", source: func(s *Source) { s.CA = CA{Secret: "src-ca", Subject: "CN=src"} }},
		{name: "TLS on both planes, Steward's peers plaintext", source: tlsSource,
			check: CheckPeerScheme, msg: "uses TLS while spec.tls.peer.enabled is false"},
		{name: "the source's CA Secret missing", source: func(s *Source) {
			tlsSource(s)
			s.CA.Err = `Secret "src-ca" not found`
		}, target: tlsTarget, check: CheckSourceCA, msg: `the source's CA (Secret src-ca, spec.bootstrap.join.caSecretName): Secret "src-ca" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, tg := source(), target()
			if tc.source != nil {
				tc.source(&s)
			}
			if tc.target != nil {
				tc.target(&tg)
			}
			checks := Preflight(s, tg)
			ok, why := Passed(checks)
			name, msg := firstFailure(checks)
			switch {
			case tc.check == "" && !ok:
				t.Fatalf("refused: %s", why)
			case tc.check == "":
				if len(checks) != 11 {
					t.Fatalf("%d checks ran, want 11", len(checks))
				}
			case ok:
				t.Fatalf("passed; want %s to fail", tc.check)
			case name != tc.check || !strings.Contains(msg, tc.msg):
				t.Fatalf("first failure %s: %q; want %s containing %q", name, msg, tc.check, tc.msg)
			case !strings.HasPrefix(why, tc.check+": "):
				t.Fatalf("Passed says %q", why)
			}
		})
	}
}

func setVersion(s *Source, v string) {
	for i := range s.Etcd.Endpoints {
		s.Etcd.Endpoints[i].Version = v
	}
}

func TestPassedWithoutChecks(t *testing.T) {
	if ok, why := Passed(nil); ok || why == "" {
		t.Fatalf("no checks must not pass: %v %q", ok, why)
	}
}

// Unreachable stops the preflight: nothing else can be judged, and nothing may look passed.
func TestPreflightStopsWhenUnreachable(t *testing.T) {
	s := source()
	s.Etcd.MemberListErr = "refused"
	if got := Preflight(s, target()); len(got) != 3 || got[2].Passed {
		t.Fatalf("checks %+v", got)
	}
}

// A source that answers nothing fails Auth too (its status cannot be read): Reachable comes first
// then, with the reason, since the first failure is what status and the refusal message show.
func TestPreflightUnreachableBeforeAnUnreadableAuth(t *testing.T) {
	s := source()
	s.Etcd.MemberListErr, s.AuthErr = "context deadline exceeded", "context deadline exceeded"
	got := Preflight(s, target())
	if len(got) != 3 || got[1].Name != CheckReachable || got[1].Passed || got[2].Name != CheckAuth || got[2].Passed {
		t.Fatalf("checks %+v", got)
	}
	if ok, why := Passed(got); ok || !strings.HasPrefix(why, CheckReachable+": ") {
		t.Fatalf("Passed: %t %q", ok, why)
	}
	// With auth on, the member list is refused but the auth status reads: Auth stays first.
	s.AuthErr, s.AuthEnabled = "", true
	if got := Preflight(s, target()); got[1].Name != CheckAuth || got[1].Passed {
		t.Fatalf("auth on: checks %+v", got)
	}
}

// Without the source's CA nothing can be read (the operator has no certificate the source
// trusts), so the preflight stops at it and says only that.
func TestPreflightStopsWithoutTheSourceCA(t *testing.T) {
	s := source()
	tlsSource(&s)
	s.CA.Err = "tls.key is missing"
	s.Etcd.MemberListErr = "x509: certificate signed by unknown authority"
	got := Preflight(s, tlsTarget2())
	if len(got) != 1 || got[0].Name != CheckSourceCA || got[0].Passed || !strings.Contains(got[0].Message, "tls.key is missing") {
		t.Fatalf("checks %+v", got)
	}
}

// tlsSource is source() with TLS on both planes and its CA taken.
func tlsSource(s *Source) {
	for i := range s.Etcd.Members {
		for j, u := range s.Etcd.Members[i].PeerURLs {
			s.Etcd.Members[i].PeerURLs[j] = strings.Replace(u, "http://", "https://", 1)
		}
	}
	s.CA = CA{Secret: "src-ca", Subject: "CN=etcd-ca", NotAfter: "2036-01-02T00:00:00Z"}
}

func tlsTarget(t *Target) { t.PeerScheme = "https" }

func tlsTarget2() Target {
	t := target()
	tlsTarget(&t)
	return t
}

// The checks run in the documented order, and a passed check says what it found (status shows
// them all before anything changes).
func TestPreflightOrderAndFindings(t *testing.T) {
	checks := Preflight(source(), target())
	want := []string{CheckSourceCA, CheckAuth, CheckReachable, CheckNoLearner, CheckHealthy, CheckNoAlarm, CheckVersion, CheckPeerScheme,
		CheckQuota, CheckNames, CheckStatefulSet}
	if len(checks) != len(want) {
		t.Fatalf("%d checks, want %d", len(checks), len(want))
	}
	for i, c := range checks {
		if c.Name != want[i] || !c.Passed || c.Message == "" {
			t.Errorf("check %d: %+v, want %s passed with a finding", i, c, want[i])
		}
	}
	for _, w := range []string{"plaintext source: no CA to take", "3 members", "leader a0", "source 3.6.16, Steward 3.6.16", "peers use http", "quota 2048.0 MiB",
		"StatefulSet etcd runs every member (3 Pods)"} {
		found := false
		for _, c := range checks {
			found = found || strings.Contains(c.Message, w)
		}
		if !found {
			t.Errorf("no finding says %q: %+v", w, checks)
		}
	}
}

// Several failures at once: Passed reports the first in order, so the user fixes them in order.
func TestPassedNamesTheFirstFailure(t *testing.T) {
	s := source()
	s.AuthEnabled = true
	s.Etcd.Alarms = []health.Alarm{{MemberID: 0xa0, Type: health.AlarmNoSpace}}
	s.StatefulSet.PreStop = true
	ok, why := Passed(Preflight(s, target()))
	if ok || !strings.HasPrefix(why, CheckAuth+": ") {
		t.Fatalf("passed=%v, why %q; want the Auth failure first", ok, why)
	}
}

// A TLS source's passed CA check names the CA Steward issues from, so the user can confirm it is
// the source's.
func TestPreflightNamesTheSourceCA(t *testing.T) {
	s := source()
	tlsSource(&s)
	checks := Preflight(s, tlsTarget2())
	if ok, why := Passed(checks); !ok {
		t.Fatalf("refused: %s", why)
	}
	if c := checks[0]; c.Name != CheckSourceCA || !strings.Contains(c.Message, "CN=etcd-ca") ||
		!strings.Contains(c.Message, "src-ca") || !strings.Contains(c.Message, "2036-01-02") {
		t.Fatalf("CA check %+v", c)
	}
}
