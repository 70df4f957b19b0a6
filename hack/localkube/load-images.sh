#!/usr/bin/env bash
# Imports image archives into every node's containerd (namespace k8s.io, the one the CRI
# uses). Default: every archive in _out/images/. Re-importing an unchanged archive is a
# no-op; a changed one moves its tag to the new image. Nodes added later start from the image
# template (image-template.sh), which is brought up to date here too.
#
# Usage: hack/localkube/load-images.sh [ARCHIVE...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/hack/localkube/nodes.sh"

(($#)) || set -- "$IMAGES_DIR"/*.tar
for a in "$@"; do [[ -f $a ]] || die "no image archive $a"; done
start=$SECONDS
n=0
for node in $(node_names); do
  alive "$node.containerd" || continue
  node_load_images "$node" "$@"
  n=$((n + 1))
done
log "imported $# image archive(s) into $n node(s) in $((SECONDS - start))s"
# Now, not at the next node's start: that is in the middle of a test.
[[ ! -d $TEMPLATE_DIR/root ]] || template_locked -x template_sync
