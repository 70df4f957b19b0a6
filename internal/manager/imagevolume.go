package manager

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcd-steward/steward/internal/resources"
)

// How member Pods get the member binary (--member-binary-volume).
const (
	MemberBinaryAuto  = "auto"  // an image volume where the API server and every node can mount one
	MemberBinaryImage = "image" // always an image volume
	MemberBinaryCopy  = "copy"  // always copied by an init container
)

// memberBinaryVolume answers, for each member Pod built, whether it mounts the Steward image
// (resources.Member.ToolsFromImage). In auto mode it reads the nodes from the manager's cache
// each time (a node added with an older runtime turns it off for the Pods built after) and the
// API server's version once.
type memberBinaryVolume struct {
	mode  string
	nodes client.Reader
	disco discovery.ServerVersionInterface

	mu      sync.Mutex
	server  string
	lastWhy *string // what was logged last, so a decision is logged once, when it changes
}

func (v *memberBinaryVolume) fromImage(ctx context.Context) bool {
	switch v.mode {
	case MemberBinaryImage:
		return true
	case MemberBinaryCopy:
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.server == "" {
		info, err := v.disco.ServerVersion()
		if err != nil {
			v.log(ctx, "the API server's version cannot be read: "+err.Error())
			return false // not remembered: asked again for the next Pod
		}
		v.server = info.GitVersion
	}
	var nodes corev1.NodeList
	if err := v.nodes.List(ctx, &nodes); err != nil {
		v.log(ctx, "the nodes cannot be listed: "+err.Error())
		return false
	}
	runtimes := make(map[string]string, len(nodes.Items))
	for _, n := range nodes.Items {
		runtimes[n.Name] = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	ok, why := resources.ImageVolumes(v.server, runtimes)
	v.log(ctx, why)
	return ok
}

// log says once per change how member Pods get the member binary.
func (v *memberBinaryVolume) log(ctx context.Context, why string) {
	if v.lastWhy != nil && *v.lastWhy == why {
		return
	}
	v.lastWhy = &why
	if why == "" {
		log.FromContext(ctx).Info("member Pods mount the member binary from the Steward image (an image volume)")
		return
	}
	log.FromContext(ctx).Info(fmt.Sprintf("member Pods copy the member binary with an init container: %s", why))
}
