# shellcheck shell=bash
# Configuration files of the local cluster's components (sourced by up.sh after lib.sh).
# Every path points inside $LK so that cluster-down removes all of it.

# write_containerd_config NODE: NODE's containerd, its own root, state, socket and runc root,
# and its CNI configuration (a bridge inside the node's namespace with the node's /24).
write_containerd_config() {
  local node=$1 d=$NODES_DIR/$1 k
  k=$(node_index "$node")
  mkdir -p "$d/containerd" "$d/cni/net.d" "$(node_runc_root "$node")"
  cat >"$d/containerd/config.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$(node_sock "$node")"

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This machine grants root every capability but CAP_SYS_RESOURCE: without this every
  # sandbox fails with "runc create failed ... can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod network namespaces under our state directory instead of /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$d/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's container state under our state directory, so leftovers can be found.
        Root = "$(node_runc_root "$node")"
        SystemdCgroup = false
EOF

  # One bridge for the node's Pods, in the node's namespace; the host routes each node's /24
  # to it, so the host and the other nodes reach every Pod IP directly (the e2e tests talk
  # to etcd Pods without port-forward). No ipMasq and no portmap: Pods need nothing beyond
  # this machine, and fewer iptables chains to clean.
  cat >"$d/cni/net.d/10-localkube.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "localkube",
  "plugins": [{
    "type": "bridge",
    "bridge": "$NODE_BRIDGE",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$d/cni/ipam",
      "ranges": [[{"subnet": "$NODE_POD_NET.$k.0/24", "gateway": "$NODE_POD_NET.$k.1"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF
}

# write_kubelet_config NODE: its own root, pod-logs and plugin directories, cgroup root and
# address; the apiserver reaches it on the node's address.
write_kubelet_config() {
  local node=$1 d=$NODES_DIR/$1/kubelet
  mkdir -p "$d/root" "$d/pod-logs" "$d/volume-plugins"
  # Pods with dnsPolicy Default get this, not the host's resolver (whose search domains
  # would also be appended to every Pod's resolv.conf).
  echo "nameserver $DNS_IP" >"$d/resolv.conf"
  cat >"$d/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host is cgroup v1 (hybrid); kubelet 1.35+ refuses v1 unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
# The node's own cgroup (kubepods under it): stopping the node kills everything in it.
cgroupRoot: /$CGROUP_PARENT/$node
containerRuntimeEndpoint: unix://$(node_sock "$node")
address: $(node_ip "$node")
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $LK/pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $d/resolv.conf
podLogsDir: $d/pod-logs
volumePluginDir: $d/volume-plugins
staticPodPath: ""
failSwapOn: false
serializeImagePulls: false
# LOCALKUBE_KUBELET_FEATURE_GATES="Name: true, ...": for measuring a gate's effect (default: none).
featureGates: {${LOCALKUBE_KUBELET_FEATURE_GATES:-}}
# Our images cannot be pulled again: never garbage-collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Every kubelet here sees the whole machine's memory and disk: no node may evict for what the
# others use (a threshold of 0% turns a signal off).
evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
# Faster feedback in tests: node status and Pod status updates.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
# The crash back-off doubles from 10 s up to 40 s here, not 5 minutes: scenarios that kill etcd
# again and again wait on it, and 40 s still outlasts Steward's 30 s crash-loop window, so a
# member held in back-off is unready as long as the window, as on a default kubelet.
crashLoopBackOff: {maxContainerRestartPeriod: 40s}
EOF
}

# write_kube_proxy_config FILE NODE KUBECONFIG: a kube-proxy for NODE's namespace; the host
# runs one more (NODE "host", no such Node) so the host and the tests reach Services too.
write_kube_proxy_config() {
  cat >"$1" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $3}
hostnameOverride: $2
mode: iptables
clusterCIDR: $POD_CIDR
detectLocalMode: ClusterCIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
# Leave the host's conntrack sysctls alone (maxPerCore 0 = do not touch).
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# CoreDNS as a host process on $DNS_IP. No `cache`: negative caching made a just-created
# peer name NXDOMAIN for seconds. No `forward`: the cluster needs only cluster names, and
# nothing should leave the machine; other names fail fast instead of timing out.
write_corefile() {
  cat >"$LK/Corefile" <<EOF
.:53 {
    bind $DNS_IP
    errors
    health $DNS_IP:8080
    ready $DNS_IP:8181
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $LK/kubeconfigs/addons localkube
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
}
EOF
}

# The StorageClasses, served by hack/localkube/provisioner. WaitForFirstConsumer like kind's:
# an operator that waits for a PVC to bind before creating the Pod would deadlock on real
# clusters, and we want to see that here. `standard` (default) is node-local, like a local
# SSD: the volume is pinned to the node it was made on and dies with it. `network` follows
# the Pod to any node, like a network-attached disk. `expandable` is node-local on a filesystem
# that grows (XFS on a loop device: provisioner/xfs.go) and allows volume expansion.
storageclass_manifest() {
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: localkube.steward.dev/hostpath
parameters: {type: node-local}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: network
provisioner: localkube.steward.dev/hostpath
parameters: {type: network}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: expandable
provisioner: localkube.steward.dev/hostpath
parameters: {type: node-local, fs: xfs}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
EOF
}
