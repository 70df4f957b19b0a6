// Command etcdctl is go.etcd.io/etcd/etcdctl/v3 built from the module proxy.
// As upstream in 3.5, ETCDCTL_API=2 selects the deprecated v2 client.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/etcdctl/v3/ctlv2"
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
)

func main() {
	api := os.Getenv("ETCDCTL_API")
	// Unset it so that it does not leak into later env/flag parsing.
	os.Unsetenv("ETCDCTL_API")
	switch api {
	case "", "3":
		ctlv3.MustStart()
	case "2":
		ctlv2.MustStart()
	default:
		fmt.Fprintf(os.Stderr, "unsupported API version: %v\n", api)
		os.Exit(1)
	}
}
