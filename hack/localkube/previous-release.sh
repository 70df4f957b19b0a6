#!/usr/bin/env bash
# Builds the operator image of Steward's previous release (the commit named in hack/previous-release)
# for the upgrade scenario and loads it into the running local cluster. The source comes from this
# repository's own history (git archive), so a clean clone is enough; the binary is cached by commit.
# Prints the image name.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ref=$(grep -v '^#' "$ROOT/hack/previous-release" | head -n 1)
[[ -n $ref ]] || die "hack/previous-release names no commit"
git -C "$ROOT" cat-file -e "$ref^{commit}" 2>/dev/null ||
  die "commit $ref (hack/previous-release) is not in this clone's history: fetch it, or clone without --depth"
image=ghcr.io/etcd-steward/steward:previous
dir=$OUT/previous-release
bin=$dir/steward-$ref
if [[ ! -x $bin ]]; then
  log "building the previous release's operator ($ref)"
  rm -rf "$dir/src" && mkdir -p "$dir/src"
  git -C "$ROOT" archive "$ref" | tar -x -C "$dir/src"
  (cd "$dir/src" && CGO_ENABLED=0 GOWORK=off go build -buildvcs=false -trimpath -o "$bin.tmp" ./cmd/steward)
  mv -f "$bin.tmp" "$bin"
  rm -rf "$dir/src"
fi
archive=$dir/steward-previous.tar # not in _out/images: only this scenario needs it
if [[ ! -f $archive || $bin -nt $archive ]]; then
  "$LK_BIN/images" operator -tag "$image" -o "$archive" -bin "$bin" >&2
fi
"$ROOT/hack/localkube/load-images.sh" "$archive"
echo "$image"
