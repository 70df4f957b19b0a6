#!/usr/bin/env bash
# Builds everything the local cluster runs, skipping what is already up to date:
# Debian packages (runc, CNI plugins, iptables, conntrack, socat, busybox-static),
# Kubernetes + etcd + versitygw + containerd 2 (via hack/toolchain.sh), CoreDNS, the hostPath provisioner,
# the pause binary, the steward operator, and the image archives (pause, etcd per version,
# operator).
#
# Usage: hack/localkube/build.sh [all|packages|kube|containerd|etcd|s3|addons|operator|images]...
#   (default: all). Output: _out/bin/localkube/, _out/bin/steward, _out/images/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false"
GO=${GO:-go}

# stale OUT SRC...: OUT is missing or some file under SRC... is newer than it.
stale() {
  local out=$1; shift
  [[ -e $out ]] || return 0
  [[ -n $(find "$@" -newer "$out" -type f -print -quit 2>/dev/null) ]]
}

# timed LABEL CMD...: run CMD and log how long it took (the build-time figures in docs).
timed() {
  local label=$1 start=$SECONDS; shift
  "$@"
  log "$label: $((SECONDS - start))s"
}

PACKAGES=(runc containernetworking-plugins iptables conntrack socat busybox-static xfsprogs)
build_packages() {
  local p missing=()
  for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  need_root
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The package may start its own containerd (on hosts with an init system); ours runs
  # from the cluster's state directory instead, so keep the packaged service out of the way.
  if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    systemctl disable --now containerd >/dev/null 2>&1 || true
    systemctl mask containerd >/dev/null 2>&1 || true
  fi
}

build_kube() { "$ROOT/hack/toolchain.sh" kube; }
build_containerd() { "$ROOT/hack/toolchain.sh" containerd; }
build_etcd() { "$ROOT/hack/toolchain.sh" etcd all; }
build_s3() { "$ROOT/hack/toolchain.sh" versitygw; }

# gomod_bin MODDIR OUT PKG [LDFLAGS]: build PKG of the module in MODDIR when its sources changed.
gomod_bin() {
  local moddir=$1 out=$2 pkg=$3 ldflags=${4:-}
  stale "$out" "$moddir" || return 0
  mkdir -p "$(dirname "$out")"
  log "building $(basename "$out") ..."
  (cd "$moddir" && "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
  mv -f "$out.tmp" "$out"
}

build_addons() {
  local lk=$ROOT/hack/localkube
  gomod_bin "$lk/coredns" "$LK_BIN/coredns" . \
    "-X github.com/coredns/coredns/coremain.GitCommit=localkube"
  gomod_bin "$lk/provisioner" "$LK_BIN/provisioner" .
  gomod_bin "$ROOT/hack/images" "$LK_BIN/pause" ./pause
  gomod_bin "$ROOT/hack/images" "$LK_BIN/images" .
}

# The operator is rebuilt every time: `go build` is a no-op (the binary is not even
# rewritten) when nothing changed, and it is what developers iterate on.
# It is built with the failpoints tag (internal/failpoint), for the fault campaign; set
# STEWARD_OPERATOR_TAGS= (empty) to build it without. Release builds (`make build`) never pass
# the tag, and even here the points are inert unless an EtcdCluster carries the annotation
# etcd.steward.dev/failpoint.
build_operator() {
  [[ -d $ROOT/cmd/steward ]] || { log "cmd/steward does not exist yet; no operator image"; return 0; }
  mkdir -p "$OUT/bin"
  "$GO" build -trimpath -tags "${STEWARD_OPERATOR_TAGS-failpoints}" -o "$OUT/bin/steward" ./cmd/steward
  # What member Pods copy and run (the data check): in the same image, a binary of its own.
  "$GO" build -trimpath -o "$OUT/bin/steward-member" ./cmd/steward-member
}

# image KIND ARCHIVE TAG INPUT... -- FLAGS...: (re)write ARCHIVE when an INPUT is newer.
image() {
  local kind=$1 archive=$2 tag=$3; shift 3
  local inputs=()
  while [[ $1 != -- ]]; do inputs+=("$1"); shift; done
  shift
  stale "$archive" "${inputs[@]}" "$LK_BIN/images" || return 0
  log "image $tag"
  "$LK_BIN/images" "$kind" -tag "$tag" -o "$archive" "$@"
}

build_images() {
  local v dir busybox=/bin/busybox
  mkdir -p "$IMAGES_DIR"
  image pause "$IMAGES_DIR/pause.tar" "$PAUSE_IMAGE" "$LK_BIN/pause" -- -bin "$LK_BIN/pause"
  for v in $(etcd_versions); do
    dir=$(toolchain_var BIN_DIR)/etcd/$v
    [[ -x $dir/etcd ]] || die "etcd $v is not built (hack/toolchain.sh etcd all)"
    [[ -x $dir/etcdutl ]] || die "etcdutl $v is not built (hack/toolchain.sh etcd all)"
    image etcd "$IMAGES_DIR/etcd-$v.tar" "$ETCD_IMAGE_REPO:$v" "$dir/etcd" "$dir/etcdctl" "$dir/etcdutl" "$busybox" -- \
      -etcd "$dir/etcd" -etcdctl "$dir/etcdctl" -etcdutl "$dir/etcdutl" -busybox "$busybox"
  done
  if [[ -x $OUT/bin/steward ]]; then
    image operator "$IMAGES_DIR/steward.tar" "$OPERATOR_IMAGE" "$OUT/bin/steward" "$OUT/bin/steward-member" -- \
      -bin "$OUT/bin/steward" -member-bin "$OUT/bin/steward-member"
  fi
}

all() {
  local start=$SECONDS
  timed packages build_packages
  timed kube build_kube
  timed containerd build_containerd
  timed etcd build_etcd
  timed s3 build_s3
  timed addons build_addons
  timed operator build_operator
  timed images build_images
  log "build done in $((SECONDS - start))s"
}

(($#)) || set -- all
for step in "$@"; do
  case $step in
    all) all ;;
    packages | kube | containerd | etcd | s3 | addons | operator | images) "build_$step" ;;
    *) die "unknown step '$step' (all|packages|kube|containerd|etcd|s3|addons|operator|images)" ;;
  esac
done
