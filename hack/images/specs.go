package main

import (
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const envPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// pauseImage mirrors registry.k8s.io/pause: one static binary, run as 65535.
func pauseImage(bin string) (v1.Image, error) {
	if err := required("bin", bin); err != nil {
		return nil, err
	}
	return build(v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{envPath}},
		[]entry{file("/pause", bin, 0o755)})
}

// etcdImage mirrors gcr.io/etcd-development/etcd (binaries in /usr/local/bin)
// plus a busybox layer, so `kubectl exec … -- sh` and `etcdctl` work in Pods.
func etcdImage(etcd, etcdctl, etcdutl, busybox string) (v1.Image, error) {
	if err := required("etcd", etcd, "etcdctl", etcdctl, "busybox", busybox); err != nil {
		return nil, err
	}
	shell, err := busyboxLayer(busybox)
	if err != nil {
		return nil, err
	}
	bins := []entry{
		dir("/usr", 0o755), dir("/usr/local", 0o755), dir("/usr/local/bin", 0o755),
		dir("/var", 0o755), dir("/var/etcd", 0o700), dir("/var/lib", 0o755), dir("/var/lib/etcd", 0o700),
		file("/usr/local/bin/etcd", etcd, 0o755),
		file("/usr/local/bin/etcdctl", etcdctl, 0o755),
	}
	if etcdutl != "" {
		if err := required("etcdutl", etcdutl); err != nil {
			return nil, err
		}
		bins = append(bins, file("/usr/local/bin/etcdutl", etcdutl, 0o755))
	}
	cfg := v1.Config{
		Cmd:          []string{"/usr/local/bin/etcd"},
		Env:          []string{envPath},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"2379/tcp": {}, "2380/tcp": {}},
	}
	return build(cfg, shell, bins)
}

// operatorImage holds the manager at /steward, and at /manager too because
// kubebuilder-style manifests run `command: [/manager]`, and the member binary at
// /steward-member (member Pods' init container copies it for the etcd container;
// optional, as releases before it had none). Non-root UID so a `runAsNonRoot: true`
// Pod is admitted.
func operatorImage(bin, memberBin string) (v1.Image, error) {
	if err := required("bin", bin); err != nil {
		return nil, err
	}
	files := append(baseFiles(), file("/steward", bin, 0o755), symlink("/manager", "steward"))
	if memberBin != "" {
		if err := required("member-bin", memberBin); err != nil {
			return nil, err
		}
		files = append(files, file("/steward-member", memberBin, 0o755))
	}
	return build(v1.Config{Entrypoint: []string{"/steward"}, User: "65532:65532", Env: []string{envPath}}, files)
}

// busyboxLayer installs busybox at /bin/busybox with a symlink per applet.
func busyboxLayer(busybox string) ([]entry, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, err
	}
	es := append(baseFiles(), dir("/bin", 0o755), file("/bin/busybox", busybox, 0o755))
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			es = append(es, symlink("/bin/"+applet, "busybox"))
		}
	}
	return es, nil
}

// baseFiles are what programs expect of any Linux root: users for `id`/`ps`,
// a sticky /tmp.
func baseFiles() []entry {
	return []entry{
		dir("/etc", 0o755), dir("/tmp", 0o1777), dir("/root", 0o700),
		text("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"),
		text("/etc/group", "root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n"),
		text("/etc/nsswitch.conf", "hosts: files dns\n"),
	}
}
