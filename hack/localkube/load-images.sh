#!/usr/bin/env bash
# Imports image archives into the running cluster's containerd (namespace k8s.io, the one
# the CRI uses). Default: every archive in _out/images/. Re-importing an unchanged archive
# is a no-op; a changed one moves its tag to the new image.
#
# Usage: hack/localkube/load-images.sh [ARCHIVE...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($#)) || set -- "$IMAGES_DIR"/*.tar
start=$SECONDS
for a in "$@"; do
  [[ -f $a ]] || die "no image archive $a"
  ctr_ images import --no-unpack=false "$a" >/dev/null || die "importing $a failed"
done
log "imported $# image archive(s) in $((SECONDS - start))s"
