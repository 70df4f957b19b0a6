// Command images writes FROM-scratch image archives (docker save format, which
// `ctr images import` reads) from binaries built on this machine, because the
// local cluster has no registry to pull from.
//
//	images pause    -bin PAUSE -tag registry.k8s.io/pause:3.10 -o pause.tar
//	images etcd     -etcd ETCD -etcdctl ETCDCTL [-etcdutl ETCDUTL] -busybox /bin/busybox -tag gcr.io/etcd-development/etcd:v3.6.16 -o etcd.tar
//	images operator -bin STEWARD -member-bin STEWARD_MEMBER -tag ghcr.io/etcd-steward/steward:dev -o steward.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: images pause|etcd|operator [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	tag := fs.String("tag", "", "image reference to tag the archive with")
	out := fs.String("o", "", "output archive")
	bin := fs.String("bin", "", "the image's binary (pause, operator)")
	memberBin := fs.String("member-bin", "", "the member binary member Pods copy and run (operator)")
	etcd := fs.String("etcd", "", "etcd server binary")
	etcdctl := fs.String("etcdctl", "", "etcdctl binary")
	etcdutl := fs.String("etcdutl", "", "etcdutl binary (optional)")
	busybox := fs.String("busybox", "/bin/busybox", "static busybox for the shell layer")
	_ = fs.Parse(os.Args[2:])
	if *tag == "" || *out == "" {
		fail(fmt.Errorf("-tag and -o are required"))
	}

	var img v1.Image
	var err error
	switch os.Args[1] {
	case "pause":
		img, err = pauseImage(*bin)
	case "etcd":
		img, err = etcdImage(*etcd, *etcdctl, *etcdutl, *busybox)
	case "operator":
		img, err = operatorImage(*bin, *memberBin)
	default:
		err = fmt.Errorf("unknown image kind %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	fail(write(img, *tag, *out))
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

// write saves the image atomically so an interrupted build never leaves a
// truncated archive that the build script would take as up to date.
func write(img v1.Image, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// build stacks layers on an empty image and sets its config.
func build(cfg v1.Config, layers ...[]entry) (v1.Image, error) {
	img := empty.Image
	for _, entries := range layers {
		l, err := layer(entries)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

func required(kv ...string) error {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			return fmt.Errorf("-%s is required", kv[i])
		}
		if _, err := os.Stat(kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}
