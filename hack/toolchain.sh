#!/usr/bin/env bash
# Builds the project's test toolchain from source, from the Go module proxy only:
# controller-gen, golangci-lint, Kubernetes (kube-apiserver ... kubectl), etcd 3.5/3.6/3.7,
# an envtest asset directory, cert-manager's controller with its CRDs, and versitygw (the
# local cluster's S3 server). Output goes to the
# git-ignored _out/ at the repo root, keyed by version: a binary that already exists is not
# rebuilt.
#
# The versions live in the go.mod files under hack/tools, hack/kube, hack/etcd/v3.X,
# hack/certmanager, hack/s3, hack/promtool and hack/helm; change them there (then `go mod tidy`
# in that module) and this script follows.
#
# Usage: hack/toolchain.sh <command>
#   tools                    controller-gen + golangci-lint
#   kube-test                kube-apiserver + kubectl (what envtest and unit tests need)
#   kube                     all six Kubernetes binaries (one shared `go build`)
#   etcd [3.5|3.6|3.7|3.6old|all]  etcd + etcdctl + etcdutl for one or all versions (default: all;
#                            3.6old is a 3.6 patch below etcd's minimum before 3.7, for one e2e)
#   envtest                  kube-test + etcd 3.6 + the _out/envtest symlinks
#                            (KUBEBUILDER_ASSETS=$PWD/_out/envtest)
#   certmanager              cert-manager-controller (hack/certmanager: certificates, SelfSigned
#                            and CA issuers only) + cert-manager's CRDs in a crds/ next to it
#   versitygw                versitygw (hack/s3), an S3 server with a POSIX backend
#   containerd               containerd 2 with its runc shim and ctr (hack/containerd), for the
#                            local cluster's nodes (image volumes need 2.1 or later)
#   promtool                 promtool (hack/promtool), for the alert rules' unit tests
#   prometheus               the Prometheus server (hack/promtool), for the e2e of the rules and
#                            the dashboard against live clusters, and `make sandbox PROMETHEUS=1`
#   helm                     helm (hack/helm), for the chart's tests and the e2e install phase
#   all                      everything above
#   versions                 KEY=VALUE lines: versions and paths (eval-safe)
#   path <name>              absolute path of one binary: controller-gen, golangci-lint,
#                            kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#                            kube-proxy, kubectl, etcd, etcdctl, etcdutl (= 3.6), etcd-3.X,
#                            etcdctl-3.X, etcdutl-3.X, certmanager (the controller),
#                            certmanager-crds (the CRD directory), versitygw, promtool, prometheus, helm;
#                            exits 1 (path still printed) when it has not been built yet
#
# Build logs go to stderr; stdout carries only the output of `versions` and `path`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

# modver GOMOD MODULE: the version MODULE is required at in GOMOD (not replace lines).
modver() {
  local v
  v=$(awk -v m="$2" '
    $1 == "require" && $2 == m && $3 ~ /^v/ { print $3; exit }
    $1 == m && $2 ~ /^v/ { print $2; exit }' "$1")
  [[ -n $v ]] || { echo "toolchain: $2 not required in $1" >&2; exit 1; }
  echo "$v"
}

# ---- versions (single source of truth: the go.mod files) ----------------------------
TOOLS_MOD=$ROOT/hack/tools
KUBE_MOD=$ROOT/hack/kube
ETCD_MOD=$ROOT/hack/etcd          # + /v3.5, /v3.6, /v3.7
CERTMANAGER_MOD=$ROOT/hack/certmanager
S3_MOD=$ROOT/hack/s3
PROMTOOL_MOD=$ROOT/hack/promtool
HELM_MOD=$ROOT/hack/helm
CONTAINERD_MOD=$ROOT/hack/containerd

CONTROLLER_GEN_VERSION=$(modver "$TOOLS_MOD/go.mod" sigs.k8s.io/controller-tools)
GOLANGCI_LINT_VERSION=$(modver "$TOOLS_MOD/go.mod" github.com/golangci/golangci-lint/v2)
KUBE_VERSION=$(modver "$KUBE_MOD/go.mod" k8s.io/kubernetes)
ETCD_35_VERSION=$(modver "$ETCD_MOD/v3.5/go.mod" go.etcd.io/etcd/server/v3)
ETCD_36_VERSION=$(modver "$ETCD_MOD/v3.6/go.mod" go.etcd.io/etcd/server/v3)
ETCD_37_VERSION=$(modver "$ETCD_MOD/v3.7/go.mod" go.etcd.io/etcd/server/v3)
# 3.6old: a 3.6 patch below etcd's minimum before 3.7, for the e2e of the upgrade guard.
ETCD_36OLD_VERSION=$(modver "$ETCD_MOD/v3.6old/go.mod" go.etcd.io/etcd/server/v3)
CERTMANAGER_VERSION=$(modver "$CERTMANAGER_MOD/go.mod" github.com/cert-manager/cert-manager)
VERSITYGW_VERSION=$(modver "$S3_MOD/go.mod" github.com/versity/versitygw)
PROMTOOL_VERSION=$(modver "$PROMTOOL_MOD/go.mod" github.com/prometheus/prometheus)
HELM_VERSION=$(modver "$HELM_MOD/go.mod" helm.sh/helm/v3)
CONTAINERD_VERSION=$(modver "$CONTAINERD_MOD/go.mod" github.com/containerd/containerd/v2)
ENVTEST_ETCD=3.6                  # the etcd minor that _out/envtest links to

KUBE_ALL=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
KUBE_TEST=(kube-apiserver kubectl)

# ---- output layout ----------------------------------------------------------------------
OUT_DIR=$ROOT/_out
BIN_DIR=$OUT_DIR/bin
TOOLS_BIN_DIR=$BIN_DIR/tools
CONTROLLER_GEN=$TOOLS_BIN_DIR/controller-gen-$CONTROLLER_GEN_VERSION
GOLANGCI_LINT=$TOOLS_BIN_DIR/golangci-lint-$GOLANGCI_LINT_VERSION
KUBE_BIN_DIR=$BIN_DIR/kube/$KUBE_VERSION
ETCD_35_BIN_DIR=$BIN_DIR/etcd/$ETCD_35_VERSION
ETCD_36_BIN_DIR=$BIN_DIR/etcd/$ETCD_36_VERSION
ETCD_37_BIN_DIR=$BIN_DIR/etcd/$ETCD_37_VERSION
ETCD_36OLD_BIN_DIR=$BIN_DIR/etcd/$ETCD_36OLD_VERSION
ENVTEST_ASSETS=$OUT_DIR/envtest
CERTMANAGER_DIR=$BIN_DIR/certmanager-$CERTMANAGER_VERSION
CERTMANAGER_BIN=$CERTMANAGER_DIR/cert-manager-controller
CERTMANAGER_CRDS=$CERTMANAGER_DIR/crds
VERSITYGW_BIN=$BIN_DIR/versitygw/$VERSITYGW_VERSION/versitygw
PROMTOOL_BIN=$BIN_DIR/promtool-$PROMTOOL_VERSION/promtool
PROMETHEUS_BIN=$BIN_DIR/promtool-$PROMTOOL_VERSION/prometheus
HELM_BIN=$BIN_DIR/helm-$HELM_VERSION/helm
CONTAINERD_BIN_DIR=$BIN_DIR/containerd/$CONTAINERD_VERSION

# Hermetic-ish Go settings: static binaries, no workspace from the repo leaking in, no VCS
# stamping (the hack modules are not the binaries' own repositories).
export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false"
GO=${GO:-go}

log() { echo "toolchain: $*" >&2; }
die() { log "$*"; exit 1; }

etcd_version() { # 3.5|3.6|3.7 -> vX.Y.Z
  case $1 in
    3.5) echo "$ETCD_35_VERSION" ;; 3.6) echo "$ETCD_36_VERSION" ;; 3.7) echo "$ETCD_37_VERSION" ;;
    3.6old) echo "$ETCD_36OLD_VERSION" ;;
    *) die "unknown etcd minor '$1' (want 3.5, 3.6, 3.7 or 3.6old)" ;;
  esac
}
etcd_bin_dir() { # 3.5|3.6|3.7 -> its bin dir
  case $1 in
    3.5) echo "$ETCD_35_BIN_DIR" ;; 3.6) echo "$ETCD_36_BIN_DIR" ;; 3.7) echo "$ETCD_37_BIN_DIR" ;;
    3.6old) echo "$ETCD_36OLD_BIN_DIR" ;;
    *) die "unknown etcd minor '$1' (want 3.5, 3.6, 3.7 or 3.6old)" ;;
  esac
}

TMP_DIRS=()
cleanup() { local d; for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do rm -rf "$d"; done; }
trap cleanup EXIT

# gobuild LABEL MODDIR DESTDIR LDFLAGS NAME=PKG...: builds all packages in ONE `go build`
# into a temporary directory next to DESTDIR, then moves each binary into place as NAME
# (so an interrupted build never leaves a half-written binary behind).
gobuild() {
  local label=$1 moddir=$2 dest=$3 ldflags=$4; shift 4
  local pkgs=() names=() spec tmp start secs i
  for spec in "$@"; do names+=("${spec%%=*}"); pkgs+=("${spec#*=}"); done
  mkdir -p "$dest"
  tmp=$(mktemp -d "$dest/.build.XXXXXX"); TMP_DIRS+=("$tmp")
  log "building $label: ${names[*]} ..."
  start=$(date +%s)
  (cd "$moddir" && "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$tmp/" "${pkgs[@]}")
  secs=$(( $(date +%s) - start ))
  for i in "${!names[@]}"; do
    mv -f "$tmp/$(exe_name "${pkgs[$i]}")" "$dest/${names[$i]}"
  done
  rm -rf "$tmp"
  log "built $label in ${secs}s -> ${dest#"$ROOT"/}"
}

# exe_name PKG: the file `go build -o DIR/` writes for PKG: its last path element, skipping a
# major-version suffix (go.etcd.io/etcd/etcdutl/v3 -> etcdutl).
exe_name() {
  local p=${1%/}
  [[ ${p##*/} =~ ^v[0-9]+$ && $p == */*/* ]] && p=${p%/*}
  echo "${p##*/}"
}

# link TARGET LINKNAME: relative symlink, so _out/ survives moving the checkout.
link() {
  local target=$1 name=$2 rel
  mkdir -p "$(dirname "$name")"
  rel=$(realpath -m --relative-to="$(dirname "$name")" "$target")
  ln -sfn "$rel" "$name"
}

# ---- parts ------------------------------------------------------------------------------
# build_one BIN LABEL MOD LDFLAGS PKG: builds the single binary BIN from package PKG of module
# MOD, unless it is there (binaries are named by version, so present means up to date).
build_one() {
  local bin=$1 label=$2 mod=$3 ldflags=$4 pkg=$5
  if [[ -x $bin ]]; then
    log "$label up to date"
    return
  fi
  gobuild "$label" "$mod" "$(dirname "$bin")" "$ldflags" "$(basename "$bin")=$pkg"
}

build_tools() {
  build_one "$CONTROLLER_GEN" "controller-gen $CONTROLLER_GEN_VERSION" "$TOOLS_MOD" \
    "-X sigs.k8s.io/controller-tools/pkg/version.version=$CONTROLLER_GEN_VERSION" \
    sigs.k8s.io/controller-tools/cmd/controller-gen
  # main.date must be non-empty or golangci-lint ignores main.version.
  build_one "$GOLANGCI_LINT" "golangci-lint $GOLANGCI_LINT_VERSION" "$TOOLS_MOD" \
    "-X main.version=${GOLANGCI_LINT_VERSION#v} -X main.commit=module-proxy -X main.date=$(build_date)" \
    github.com/golangci/golangci-lint/v2/cmd/golangci-lint
  link "$CONTROLLER_GEN" "$BIN_DIR/controller-gen"
  link "$GOLANGCI_LINT" "$BIN_DIR/golangci-lint"
}

build_date() { date -u ${SOURCE_DATE_EPOCH:+--date=@$SOURCE_DATE_EPOCH} +%Y-%m-%dT%H:%M:%SZ; }

kube_ldflags() {
  local v=${KUBE_VERSION#v} major minor pkg flags=""
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit= -X $pkg.buildDate=$(build_date)"
  done
  echo "$flags"
}

# build_kube NAME...: builds the missing ones among NAME... in one shared `go build`.
build_kube() {
  local name missing=()
  for name in "$@"; do
    [[ -x $KUBE_BIN_DIR/$name ]] || missing+=("$name=./cmd/$name")
  done
  if ((${#missing[@]} == 0)); then
    log "kubernetes $KUBE_VERSION ($*) up to date"
    return
  fi
  gobuild "kubernetes $KUBE_VERSION" "$KUBE_MOD" "$KUBE_BIN_DIR" "$(kube_ldflags)" "${missing[@]}"
}

# build_etcd MINOR: etcd + etcdctl + etcdutl of hack/etcd/vMINOR. etcdutl is upstream's own
# main package (a `tool` of the module); etcd and etcdctl are small wrappers in cmd/.
build_etcd() {
  local minor=$1 ver dir name pkg missing=()
  ver=$(etcd_version "$minor"); dir=$(etcd_bin_dir "$minor")
  for name in etcd etcdctl etcdutl; do
    pkg=./cmd/$name
    [[ $name != etcdutl ]] || pkg=go.etcd.io/etcd/etcdutl/v3
    [[ -x $dir/$name ]] || missing+=("$name=$pkg")
  done
  if ((${#missing[@]} == 0)); then
    log "etcd $ver up to date"
    return
  fi
  gobuild "etcd $ver" "$ETCD_MOD/v$minor" "$dir" "" "${missing[@]}"
}

build_envtest() {
  build_kube "${KUBE_TEST[@]}"
  build_etcd "$ENVTEST_ETCD"
  local name dir
  dir=$(etcd_bin_dir "$ENVTEST_ETCD")
  for name in "${KUBE_TEST[@]}"; do link "$KUBE_BIN_DIR/$name" "$ENVTEST_ASSETS/$name"; done
  for name in etcd etcdctl etcdutl; do link "$dir/$name" "$ENVTEST_ASSETS/$name"; done
  log "envtest assets ready: KUBEBUILDER_ASSETS=$ENVTEST_ASSETS"
}

# build_certmanager: hack/certmanager's binary, and the CRDs of the same cert-manager module
# (plain YAML in its deploy/crds/) copied from the module cache into $CERTMANAGER_CRDS.
build_certmanager() {
  build_one "$CERTMANAGER_BIN" "cert-manager $CERTMANAGER_VERSION" "$CERTMANAGER_MOD" \
    "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERTMANAGER_VERSION" \
    github.com/etcd-steward/steward/hack/certmanager
  if [[ -d $CERTMANAGER_CRDS ]]; then
    return
  fi
  local src tmp
  src=$(cd "$CERTMANAGER_MOD" && "$GO" mod download -json github.com/cert-manager/cert-manager |
    awk -F'"' '$2 == "Dir" { print $4 }')
  [[ -d $src/deploy/crds ]] || die "no deploy/crds in cert-manager module dir '$src'"
  tmp=$(mktemp -d "$CERTMANAGER_DIR/.crds.XXXXXX"); TMP_DIRS+=("$tmp"); chmod 0755 "$tmp"
  install -m 0644 "$src"/deploy/crds/*.yaml "$tmp/" # the module cache is read-only
  mv "$tmp" "$CERTMANAGER_CRDS"
  log "copied cert-manager $CERTMANAGER_VERSION CRDs -> ${CERTMANAGER_CRDS#"$ROOT"/}"
}

# build_versitygw: hack/s3's pinned versitygw (its own main package, a `tool` of the module).
build_versitygw() {
  build_one "$VERSITYGW_BIN" "versitygw $VERSITYGW_VERSION" "$S3_MOD" \
    "-X main.Version=$VERSITYGW_VERSION -X main.Build=module-proxy -X main.BuildTime=$(build_date)" \
    github.com/versity/versitygw/cmd/versitygw
}

# Without the service-discovery plugins (the cloud SDKs): rule tests need none, and the build is a
# fraction of the full one.
build_promtool() {
  (export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=remove_all_sd"
    build_one "$PROMTOOL_BIN" "promtool $PROMTOOL_VERSION" "$PROMTOOL_MOD" "" \
      github.com/prometheus/prometheus/cmd/promtool)
  link "$PROMTOOL_BIN" "$BIN_DIR/promtool"
}

# build_prometheus: the Prometheus server of the same module, with Kubernetes service discovery
# only (the e2e and the sandbox scrape the operator and the members as the shipped monitors do)
# and without the web UI's built-in assets (the API is what is used; the UI page says so).
build_prometheus() {
  (export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=remove_all_sd,enable_kubernetes_sd"
    build_one "$PROMETHEUS_BIN" "prometheus $PROMTOOL_VERSION" "$PROMTOOL_MOD" "" \
      github.com/prometheus/prometheus/cmd/prometheus)
  link "$PROMETHEUS_BIN" "$BIN_DIR/prometheus"
}

# build_helm: the helm CLI of hack/helm, stamped with its version, and with the Kubernetes version
# `helm template` assumes (.Capabilities.KubeVersion) taken from the client-go it is built with.
build_helm() {
  local cg major=1 minor pkg flags
  cg=$(modver "$HELM_MOD/go.mod" k8s.io/client-go) # v0.MINOR.PATCH
  minor=${cg#v0.}; minor=${minor%%.*}
  flags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    flags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
  done
  build_one "$HELM_BIN" "helm $HELM_VERSION" "$HELM_MOD" "$flags" helm.sh/helm/v3/cmd/helm
  link "$HELM_BIN" "$BIN_DIR/helm"
}

# build_containerd: containerd, containerd-shim-runc-v2 and ctr of hack/containerd in one build.
# Static (no cgo): the btrfs snapshotter, the only part that needs cgo, is not built; runc stays
# Debian's.
build_containerd() {
  local name missing=()
  for name in containerd containerd-shim-runc-v2 ctr; do
    [[ -x $CONTAINERD_BIN_DIR/$name ]] || missing+=("$name=github.com/containerd/containerd/v2/cmd/$name")
  done
  if ((${#missing[@]} == 0)); then
    log "containerd $CONTAINERD_VERSION up to date"
    return
  fi
  gobuild "containerd $CONTAINERD_VERSION" "$CONTAINERD_MOD" "$CONTAINERD_BIN_DIR" \
    "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION -X github.com/containerd/containerd/v2/version.Package=module-proxy" \
    "${missing[@]}"
}

print_versions() {
  local k
  for k in KUBE_VERSION ETCD_35_VERSION ETCD_36_VERSION ETCD_37_VERSION ETCD_36OLD_VERSION \
    CONTROLLER_GEN_VERSION GOLANGCI_LINT_VERSION CERTMANAGER_VERSION VERSITYGW_VERSION PROMTOOL_VERSION HELM_VERSION OUT_DIR \
    BIN_DIR TOOLS_BIN_DIR CONTROLLER_GEN GOLANGCI_LINT KUBE_BIN_DIR ETCD_35_BIN_DIR ETCD_36_BIN_DIR \
    ETCD_37_BIN_DIR ETCD_36OLD_BIN_DIR ENVTEST_ASSETS CERTMANAGER_DIR CERTMANAGER_BIN CERTMANAGER_CRDS VERSITYGW_BIN PROMTOOL_BIN PROMETHEUS_BIN HELM_BIN \
    CONTAINERD_VERSION CONTAINERD_BIN_DIR; do
    printf '%s=%q\n' "$k" "${!k}"
  done
}

print_path() {
  local name=${1:-} p
  case $name in
    controller-gen) p=$CONTROLLER_GEN ;;
    golangci-lint) p=$GOLANGCI_LINT ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | kubectl)
      p=$KUBE_BIN_DIR/$name ;;
    etcd | etcdctl | etcdutl) p=$(etcd_bin_dir "$ENVTEST_ETCD")/$name ;;
    etcd-3.[0-9] | etcdctl-3.[0-9] | etcdutl-3.[0-9]) p=$(etcd_bin_dir "${name#*-}")/${name%-*} ;;
    envtest) p=$ENVTEST_ASSETS ;;
    certmanager) p=$CERTMANAGER_BIN ;;
    certmanager-crds) p=$CERTMANAGER_CRDS ;;
    versitygw) p=$VERSITYGW_BIN ;;
    promtool) p=$PROMTOOL_BIN ;;
    prometheus) p=$PROMETHEUS_BIN ;;
    helm) p=$HELM_BIN ;;
    containerd | containerd-shim-runc-v2 | ctr) p=$CONTAINERD_BIN_DIR/$name ;;
    *) die "path: unknown binary '$name'" ;;
  esac
  echo "$p"
  [[ -e $p ]] || { log "$name is not built yet (see hack/toolchain.sh -h)"; return 1; }
}

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }

# Serialise concurrent builders (several scripts and engineers share _out/).
lock() {
  mkdir -p "$OUT_DIR"
  if command -v flock >/dev/null; then
    exec 9>"$OUT_DIR/.toolchain.lock"
    flock 9
  fi
}

cmd=${1:-}
case $cmd in
  tools) lock; build_tools ;;
  kube-test) lock; build_kube "${KUBE_TEST[@]}" ;;
  kube) lock; build_kube "${KUBE_ALL[@]}" ;;
  etcd)
    lock
    case ${2:-all} in
      all) for m in 3.5 3.6 3.7 3.6old; do build_etcd "$m"; done ;;
      *) build_etcd "$2" ;;
    esac ;;
  envtest) lock; build_envtest ;;
  certmanager) lock; build_certmanager ;;
  versitygw) lock; build_versitygw ;;
  promtool) lock; build_promtool ;;
  prometheus) lock; build_prometheus ;;
  helm) lock; build_helm ;;
  containerd) lock; build_containerd ;;
  all)
    lock
    start=$(date +%s)
    build_tools
    build_kube "${KUBE_ALL[@]}"
    for m in 3.5 3.6 3.7 3.6old; do build_etcd "$m"; done
    build_envtest
    build_certmanager
    build_versitygw
    build_promtool
    build_prometheus
    build_helm
    build_containerd
    log "all done in $(( $(date +%s) - start ))s"
    ;;
  versions) print_versions ;;
  path) print_path "${2:-}" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
