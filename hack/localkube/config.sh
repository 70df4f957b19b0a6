# shellcheck shell=bash
# Configuration files of the local cluster's components (sourced by up.sh after lib.sh).
# Every path points inside $LK so that cluster-down removes all of it.

write_containerd_config() {
  mkdir -p "$LK/containerd" "$LK/cni/net.d" "$RUNC_ROOT"
  cat >"$LK/containerd/config.toml" <<EOF
version = 2
root = "$LK/containerd/root"
state = "$LK/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$LK/containerd/opt"

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
    conf_dir = "$LK/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's container state under our state directory, so leftovers can be found.
        Root = "$RUNC_ROOT"
        SystemdCgroup = false
EOF

  # One bridge for all Pods; the host holds the gateway address, so it routes to every
  # Pod IP directly (the e2e tests talk to etcd Pods without port-forward). No ipMasq and
  # no portmap: Pods need nothing beyond this machine, and fewer iptables chains to clean.
  cat >"$LK/cni/net.d/10-localkube.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "localkube",
  "plugins": [{
    "type": "bridge",
    "bridge": "$BRIDGE",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$LK/cni/ipam",
      "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$LK/kubelet" "$LK/kubelet/root" "$LK/kubelet/pod-logs" "$LK/kubelet/volume-plugins"
  # Pods with dnsPolicy Default get this, not the host's resolver (whose search domains
  # would also be appended to every Pod's resolv.conf).
  echo "nameserver $DNS_IP" >"$LK/kubelet/resolv.conf"
  cat >"$LK/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host is cgroup v1 (hybrid); kubelet 1.35+ refuses v1 unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
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
resolvConf: $LK/kubelet/resolv.conf
podLogsDir: $LK/kubelet/pod-logs
volumePluginDir: $LK/kubelet/volume-plugins
staticPodPath: ""
failSwapOn: false
serializeImagePulls: false
# Our images cannot be pulled again: never garbage-collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
# Faster feedback in tests: node status and Pod status updates.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
EOF
}

write_kube_proxy_config() {
  cat >"$LK/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $LK/kubeconfigs/kube-proxy}
hostnameOverride: $NODE_NAME
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

# The default StorageClass, served by hack/localkube/provisioner. WaitForFirstConsumer
# like kind's: an operator that waits for a PVC to bind before creating the Pod would
# deadlock on real clusters, and we want to see that here.
storageclass_manifest() {
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: localkube.steward.dev/hostpath
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
EOF
}
