// Command coredns is CoreDNS with only the plugins the local cluster needs.
//
// Why a wrapper: the stock build links ~60 plugins (cloud DNS providers,
// dnstap, ...) and takes much longer to build. The local cluster serves only
// cluster names, so there is no `forward` (nothing leaves the machine) and no
// `cache` (negative caching made a just-created peer name NXDOMAIN for
// seconds, while etcd asked before the EndpointSlice existed).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// Order matters: it is the order in which plugins see a request, and it
	// must be a subsequence of CoreDNS's own dnsserver.Directives.
	dnsserver.Directives = []string{
		"reload",
		"bind",
		"ready",
		"health",
		"errors",
		"log",
		"hosts",
		"kubernetes",
	}
}

func main() {
	coremain.Run()
}
