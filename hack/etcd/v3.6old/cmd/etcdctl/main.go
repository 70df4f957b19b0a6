// Command etcdctl is go.etcd.io/etcd/etcdctl/v3 built from the module proxy.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
