package main

// Volumes that really grow: with the StorageClass parameter `fs: xfs` a volume is an XFS
// filesystem on a loop device over a sparse image file next to its directory
// (<dir>.img), mounted on the directory. Growing it is what a cloud disk's resize is: the image
// grows, the loop device learns its new size, xfs_growfs grows the mounted filesystem (online;
// ext4's online resize needs CAP_SYS_RESOURCE, which root lacks on this machine kind, XFS's only
// CAP_SYS_ADMIN), and the PV and the claim's status say the new capacity. A directory would never
// grow, so resizing one would prove nothing.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// xfsMinBytes is the smallest filesystem mkfs.xfs makes (300 MiB): smaller claims get an image
// of this size (sparse: it costs what is written) and a PV of the size they asked for.
const xfsMinBytes = 300 << 20

func imagePath(dir string) string { return dir + ".img" }

func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// makeXFS creates the image, a loop device over it and the filesystem, and mounts it on dir. A
// provisioning retried after a failure starts again from nothing.
func makeXFS(ctx context.Context, dir string, size resource.Quantity) error {
	if isMountPoint(dir) {
		return nil
	}
	if err := removeXFS(ctx, dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	img := imagePath(dir)
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(max(size.Value(), xfsMinBytes)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dev, err := run(ctx, "losetup", "--find", "--show", img)
	if err != nil {
		return err
	}
	if _, err := run(ctx, "mkfs.xfs", "-q", dev); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if _, err := run(ctx, "mount", dev, dir); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777)
}

// loopDevices are the loop devices over img.
func loopDevices(ctx context.Context, img string) ([]string, error) {
	out, err := run(ctx, "losetup", "--noheadings", "--output", "NAME", "--associated", img)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Fields(out), nil
}

// removeXFS unmounts dir and detaches and deletes its image; a volume without one is left as is.
func removeXFS(ctx context.Context, dir string) error {
	img := imagePath(dir)
	if _, err := os.Stat(img); os.IsNotExist(err) {
		return nil
	}
	if isMountPoint(dir) {
		if _, err := run(ctx, "umount", dir); err != nil {
			return err
		}
	}
	devs, err := loopDevices(ctx, img)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if _, err := run(ctx, "losetup", "--detach", d); err != nil {
			return err
		}
	}
	return os.Remove(img)
}

func isMountPoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// growXFS grows the volume at dir to size, online.
func growXFS(ctx context.Context, dir string, size resource.Quantity) error {
	img := imagePath(dir)
	st, err := os.Stat(img)
	if err != nil {
		return err
	}
	if size.Value() > st.Size() {
		if err := os.Truncate(img, size.Value()); err != nil {
			return err
		}
	}
	devs, err := loopDevices(ctx, img)
	if err != nil || len(devs) == 0 {
		return fmt.Errorf("no loop device over %s: %v", img, err)
	}
	if _, err := run(ctx, "losetup", "--set-capacity", devs[0]); err != nil {
		return err
	}
	_, err = run(ctx, "xfs_growfs", dir)
	return err
}

// isXFSVolume is whether pv is one of ours on XFS (its directory has an image beside it).
func isXFSVolume(pv *v1.PersistentVolume) bool {
	if pv.Spec.Local == nil {
		return false
	}
	_, err := os.Stat(imagePath(pv.Spec.Local.Path))
	return err == nil
}
