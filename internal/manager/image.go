package manager

import (
	"context"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// selfImage finds the image the backup Jobs and restore init containers run: --operator-image, or
// the image of the operator's own Pod (POD_NAME and POD_NAMESPACE from the downward API), so an
// install that renames or pins the image (kustomize images:, a digest) needs no second setting.
type selfImage struct {
	flag   string
	reader client.Reader
	mu     sync.Mutex
	found  string
}

func (s *selfImage) get(ctx context.Context) (string, error) {
	if s.flag != "" {
		return s.flag, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found != "" {
		return s.found, nil
	}
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return "", fmt.Errorf("set --operator-image (or POD_NAME and POD_NAMESPACE so Steward can read its own Pod's image)")
	}
	var pod corev1.Pod
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return "", fmt.Errorf("reading the operator's own Pod %s/%s for its image: %w", ns, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "manager" || len(pod.Spec.Containers) == 1 {
			s.found = c.Image
			return s.found, nil
		}
	}
	return "", fmt.Errorf("the operator's Pod %s/%s has no container named manager", ns, name)
}
