package resources

import (
	"fmt"
	"strconv"
	"strings"
)

// Runtimes that mount image volumes, by the name a Node reports in
// status.nodeInfo.containerRuntimeVersion ("containerd://2.1.0"), and the first version that does.
var imageVolumeRuntimes = map[string][2]int{"containerd": {2, 1}, "cri-o": {1, 31}}

// ImageVolumes says whether member Pods may mount the Steward image as a volume (Member.
// ToolsFromImage) and, when not, why. The API server must serve image volumes (on by default from
// Kubernetes 1.35) and every node's runtime must mount them: a runtime that cannot fails the Pod's
// start, and which node a Pod lands on is the scheduler's to say. So any node with another
// runtime, an older one, or one that does not say, and no node at all, mean copying the binary.
func ImageVolumes(server string, runtimes map[string]string) (bool, string) {
	if major, minor, ok := majorMinor(strings.TrimPrefix(server, "v")); !ok || major < 1 || major == 1 && minor < 35 {
		return false, fmt.Sprintf("the API server is %q: image volumes need Kubernetes 1.35 or later", server)
	}
	if len(runtimes) == 0 {
		return false, "no node says which container runtime it runs"
	}
	for node, rt := range runtimes {
		name, v, _ := strings.Cut(rt, "://")
		first, known := imageVolumeRuntimes[name]
		major, minor, ok := majorMinor(v)
		if !known || !ok || major < first[0] || major == first[0] && minor < first[1] {
			return false, fmt.Sprintf("node %s runs %q: image volumes need containerd 2.1 or CRI-O 1.31 or later", node, rt)
		}
	}
	return true, ""
}

// majorMinor reads "1.37.2", "1.37+" or "2.1.0-rc.1" as (1, 37), (1, 37), (2, 1).
func majorMinor(v string) (int, int, bool) {
	majorS, rest, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, false
	}
	major, err := strconv.Atoi(majorS)
	if err != nil {
		return 0, 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	minor, err := strconv.Atoi(rest[:end])
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}
