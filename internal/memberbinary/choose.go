// Package memberbinary decides how member Pods get the member binary (cmd/steward-member): mounted
// from the Steward image as an image volume where the cluster can, else copied by an init
// container (resources.Member.ToolsFromImage). The evidence itself is resources.ImageVolumes.
package memberbinary

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcd-steward/steward/internal/resources"
)

// Modes of --member-binary-volume.
const (
	Auto  = "auto"  // an image volume where the API server and every node can mount one
	Image = "image" // always an image volume
	Copy  = "copy"  // always copied by an init container
)

// recheckNodes is how long an auto decision stands before the nodes are listed again: a node
// that joins with an older runtime turns image volumes off for the Pods built after that.
const recheckNodes = 30 * time.Second

// Chooser answers, for each member Pod built, whether it mounts the Steward image
// (resources.Member.ToolsFromImage). In Auto mode (and "") it lists the nodes live (the operator keeps no
// Node cache, see controller.nodeFacts) at most every recheckNodes, and reads the API server's
// version once.
type Chooser struct {
	Mode   string
	Nodes  client.Reader                    // live reads, not a cache
	Server discovery.ServerVersionInterface // the API server's version
	Every  time.Duration                    // how long a decision stands; 0 is recheckNodes

	mu      sync.Mutex
	server  string
	checked time.Time
	decided bool
	lastWhy *string // what was logged last, so a decision is logged once, when it changes
}

// FromImage says whether the member Pod built now mounts the Steward image.
func (v *Chooser) FromImage(ctx context.Context) bool {
	switch v.Mode {
	case Image:
		return true
	case Copy:
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	every := v.Every
	if every == 0 {
		every = recheckNodes
	}
	if !v.checked.IsZero() && time.Since(v.checked) < every {
		return v.decided
	}
	if v.server == "" {
		info, err := v.Server.ServerVersion()
		if err != nil {
			v.log(ctx, "the API server's version cannot be read: "+err.Error())
			return false // not remembered: asked again for the next Pod
		}
		v.server = info.GitVersion
	}
	var nodes corev1.NodeList
	if err := v.Nodes.List(ctx, &nodes); err != nil {
		v.log(ctx, "the nodes cannot be listed: "+err.Error())
		return false
	}
	runtimes := make(map[string]string, len(nodes.Items))
	for _, n := range nodes.Items {
		runtimes[n.Name] = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	ok, why := resources.ImageVolumes(v.server, runtimes)
	v.log(ctx, why)
	v.checked, v.decided = time.Now(), ok
	return ok
}

// log says once per change how member Pods get the member binary.
func (v *Chooser) log(ctx context.Context, why string) {
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
