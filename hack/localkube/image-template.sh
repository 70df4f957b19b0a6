# shellcheck shell=bash
# The image template (sourced by nodes.sh): one containerd root into which every archive of
# $IMAGES_DIR is imported and unpacked once. A new node's containerd root starts as a copy of it:
# the image content and the unpacked layers hard-linked, the two metadata databases copied.
# Why: the suite adds about 24 nodes a run, and importing the archives into each (about 160 MB
# unpacked, at the lowest CPU priority so the members of other nodes keep their heartbeats) took
# 22-28 s per node on CI's 2 cores. Linking is safe because both are immutable once written:
# a container writes only to a snapshot of its own, on top of the unpacked layers, and a node
# that deletes an image only removes its own links.
TEMPLATE_DIR=$LK/image-template

# template_config: the template's containerd, images only (no CRI, no network).
template_config() {
  mkdir -p "$TEMPLATE_DIR/stamps"
  cat >"$TEMPLATE_DIR/config.toml" <<EOF
version = 2
root = "$TEMPLATE_DIR/root"
state = "$TEMPLATE_DIR/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$TEMPLATE_DIR/containerd.sock"
EOF
}

# template_stamp ARCHIVE: what the template records of an archive it imported.
template_stamp() { stat -c '%s %Y' "$1"; }

# template_sync: imports into the template every archive of $IMAGES_DIR that is new or changed
# since it was imported there (a rebuilt steward.tar moves its tag, as on the nodes). Callers
# hold the template's lock exclusively.
template_sync() {
  local a changed=()
  for a in "$IMAGES_DIR"/*.tar; do
    [[ -f $a ]] || continue
    [[ $(cat "$TEMPLATE_DIR/stamps/$(basename "$a")" 2>/dev/null) == "$(template_stamp "$a")" ]] || changed+=("$a")
  done
  ((${#changed[@]})) || return 0
  local start=$SECONDS
  template_config
  # nice: a sync during the suite (a changed archive) must not starve the members of CPU.
  START_EXE=containerd start_proc image-template.containerd nice -n 19 containerd --config "$TEMPLATE_DIR/config.toml" --log-level warn
  wait_for "the image template's containerd" 30 ctr --address "$TEMPLATE_DIR/containerd.sock" version ||
    die "the image template's containerd did not start (log: $LK/logs/image-template.containerd.log)"
  for a in "${changed[@]}"; do
    ctr --address "$TEMPLATE_DIR/containerd.sock" --namespace k8s.io images import --no-unpack=false "$a" >/dev/null ||
      { stop_proc image-template.containerd; die "importing $a into the image template failed"; }
    template_stamp "$a" >"$TEMPLATE_DIR/stamps/$(basename "$a")"
  done
  # Stopped, so the databases copied from it are consistent.
  stop_proc image-template.containerd
  log "image template: imported ${#changed[@]} archive(s) in $((SECONDS - start))s"
}

# template_locked MODE CMD...: CMD under the template's lock (MODE -s to read it, -x to change it).
template_locked() {
  local mode=$1; shift
  mkdir -p "$TEMPLATE_DIR"
  (
    exec 8>"$TEMPLATE_DIR/.lock"
    flock "$mode" 8
    "$@"
  )
}

# template_clone_locked NODE: the copy, under the template's shared lock.
template_clone_locked() {
  local root=$NODES_DIR/$1/containerd/root src=$TEMPLATE_DIR/root
  local content=io.containerd.content.v1.content snap=io.containerd.snapshotter.v1.overlayfs
  local meta=io.containerd.metadata.v1.bolt
  mkdir -p "$root/$content" "$root/$snap" "$root/$meta"
  cp -al "$src/$content/blobs" "$root/$content/"
  cp -al "$src/$snap/snapshots" "$root/$snap/"
  cp "$src/$snap/metadata.db" "$root/$snap/"
  cp "$src/$meta/meta.db" "$root/$meta/"
}

# template_clone NODE: NODE's containerd root, before its containerd first starts, from the
# template, brought up to date with $IMAGES_DIR first.
template_clone() {
  template_locked -x template_sync
  template_locked -s template_clone_locked "$1"
}
