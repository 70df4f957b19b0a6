// Command provisioner is the local cluster's dynamic PV provisioner: one
// directory per PersistentVolume under -base-dir, exposed as a `local` PV,
// removed when the PV is released. The StorageClass parameter `type` says
// where the volume may be used: `node-local` (the default) pins it to the
// node the scheduler chose, like a local SSD (its directory is
// <base-dir>/<node>/..., deleted with the node by hack/localkube/node.sh);
// `network` lets it follow the Pod to any node, like a network-attached
// disk (every node of the local cluster sees the host's filesystem).
//
// Why `local` and not hostPath: the kubelet applies a Pod's fsGroup to local
// volumes (as to block-backed CSI volumes on real clusters) and never to
// hostPath ones, so Pods running as non-root see what they would elsewhere,
// including data an older root-running Pod left behind.
//
// Why our own: the cluster runs as host processes (no in-cluster manifests to
// pull), and a host process writing under the cluster's state directory means
// `cluster-down` removes every volume with everything else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

type hostPathProvisioner struct {
	baseDir string
}

// networkDir is the base directory's child holding volumes that follow the Pod.
const networkDir = "_network"

func (p *hostPathProvisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if opts.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claim selectors are not supported")
	}
	node := opts.SelectedNodeName
	var dir string
	var affinity v1.NodeSelectorRequirement
	switch typ := opts.StorageClass.Parameters["type"]; typ {
	case "", "node-local":
		if node == "" {
			return nil, controller.ProvisioningFinished, errors.New("node-local volumes need volumeBindingMode WaitForFirstConsumer")
		}
		dir = filepath.Join(p.baseDir, node, opts.PVC.Namespace+"_"+opts.PVC.Name+"_"+opts.PVName)
		affinity = v1.NodeSelectorRequirement{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}
	case "network":
		dir = filepath.Join(p.baseDir, networkDir, opts.PVC.Namespace+"_"+opts.PVC.Name+"_"+opts.PVName)
		affinity = v1.NodeSelectorRequirement{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpExists}
	default:
		return nil, controller.ProvisioningFinished, fmt.Errorf("unknown volume type %q (node-local or network)", typ)
	}
	if fs := opts.StorageClass.Parameters["fs"]; fs == "xfs" {
		if err := makeXFS(context.Background(), dir, opts.PVC.Spec.Resources.Requests[v1.ResourceStorage]); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
	} else if fs != "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("unknown fs %q (xfs, or none for a directory)", fs)
	}
	// 0o777: the Pod may run as any UID (etcd images often run non-root).
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: opts.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			MountOptions:                  opts.StorageClass.MountOptions,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				Local: &v1.LocalVolumeSource{Path: dir},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{affinity}}},
			}},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p *hostPathProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	var dir string
	switch {
	case pv.Spec.Local != nil:
		dir = filepath.Clean(pv.Spec.Local.Path)
	case pv.Spec.HostPath != nil: // made before volumes were local
		dir = filepath.Clean(pv.Spec.HostPath.Path)
	default:
		return &controller.IgnoredError{Reason: "not a local volume"}
	}
	// Never remove anything outside our own base directory, whatever the PV says.
	if !inside(p.baseDir, dir) {
		return &controller.IgnoredError{Reason: fmt.Sprintf("%s is outside %s", dir, p.baseDir)}
	}
	if err := removeXFS(ctx, dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func inside(base, dir string) bool {
	return strings.HasPrefix(filepath.Clean(dir), filepath.Clean(base)+string(filepath.Separator))
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	name := flag.String("provisioner-name", "localkube.steward.dev/hostpath", "provisioner name StorageClasses refer to")
	baseDir := flag.String("base-dir", "", "directory under which volumes are created")
	flag.Parse()
	if *baseDir == "" {
		klog.Exit("-base-dir is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Exit(err)
	}
	if err := os.MkdirAll(*baseDir, 0o755); err != nil {
		klog.Exit(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	pc := controller.NewProvisionController(ctx, client, *name,
		&hostPathProvisioner{baseDir: *baseDir},
		// A single instance: leader election would only add a start delay.
		controller.LeaderElection(false),
		controller.MetricsPort(0),
	)
	klog.Infof("provisioning %s under %s", *name, *baseDir)
	go (&resizer{client: client, baseDir: *baseDir}).run(ctx)
	pc.Run(ctx)
}
