package evidence

import "testing"

func TestPeerRefusedCertificate(t *testing.T) {
	for verdict, want := range map[string]bool{
		// etcd 3.6 against a peer with --peer-cert-allowed-cn (internal/datacheck's real-etcd test).
		`the last, https://etcd-0.etcd-headless.db.svc:2380, failed with: Get "https://etcd-0.etcd-headless.db.svc:2380/members": remote error: tls: bad certificate`: true,
		"failed with: remote error: tls: unknown certificate authority":                                                                                               true,
		"failed with: remote error: tls: certificate required":                                                                                                        true,
		// Not a refusal by the peer: unreachable, slow, or this member distrusting the peer.
		"failed with: dial tcp 10.0.0.1:2380: connect: connection refused":                              false,
		`failed with: Get "https://x:2380/members": context deadline exceeded`:                          false,
		"failed with: tls: failed to verify certificate: x509: certificate signed by unknown authority": false,
		"": false,
	} {
		if got := PeerRefusedCertificate(verdict); got != want {
			t.Errorf("PeerRefusedCertificate(%q) = %t, want %t", verdict, got, want)
		}
	}
}
