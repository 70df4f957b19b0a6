package evidence

import "strings"

// PeerRefusedCertificate says whether a joining member's etcd was turned away by a peer that
// refused its certificate, from what etcd said of the peer's answer (the data check's JoinRefused
// verdict): the TLS alerts a Go or OpenSSL server sends when the client certificate fails its
// checks (etcd's --peer-cert-allowed-cn and --peer-cert-allowed-hostname answer "bad certificate").
// Anything else (a refused or timed-out connection, this member not trusting the peer's own
// certificate) is not the peer's refusal: the member could not reach it, or does not trust it.
func PeerRefusedCertificate(verdict string) bool {
	for _, alert := range []string{"bad certificate", "unknown certificate authority", "certificate required",
		"unknown certificate", "access denied"} {
		if strings.Contains(verdict, "remote error: tls: "+alert) {
			return true
		}
	}
	return false
}
