#!/usr/bin/env bash
# make image: the kip714 image, built here without any registry (docs/fleet.md, "Deploy on Kubernetes").
#   1. the base: a Debian root filesystem with python3 (mmdebstrap --variant=apt, from this host's own Debian
#      sources and apt settings), imported with podman as $BASE; made once, kept until make image-clean;
#   2. the kip714 wheel built from this checkout;
#   3. podman build with deploy/image/Containerfile: the wheel and its dependencies from the package index,
#      with the host's pip configuration and CA bundle (deploy/image/pip_config.py) in the build context,
#      which the build mounts and never copies into a layer.
# Prints how long each step took and the image's size. Environment: PY (the Python that builds the wheel),
# IMAGE (default localhost/kip714), BASE (localhost/kip714-base:$SUITE), SUITE (bookworm: its python3 is the
# 3.11 of the wheel), CONTAINERS_CONF (default deploy/image/containers.conf).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SUITE=${SUITE:-bookworm}
IMAGE=${IMAGE:-localhost/kip714}
BASE=${BASE:-localhost/kip714-base:$SUITE}
OUT=$PWD/build/image
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/deploy/image/containers.conf}
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' src/kip714/__init__.py)
start=$SECONDS
mkdir -p "$OUT"

# ------------------------------------------------------------------------------------------ 1. the base
if ! podman image exists "$BASE"; then
  t=$SECONDS
  # the host's Debian sources (not a third party's: their keys are not in the root filesystem) and its apt
  # settings (a proxy, Check-Valid-Until for a snapshot mirror): no mirror is named here
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -Eq '^[^#]*(deb|URIs:).*debian' "$f" && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || { echo "make image: no Debian source in /etc/apt/sources.list*" >&2; exit 1; }
  aptopts=()
  for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q '^[[:space:]]*Acquire' "$f" && aptopts+=("--aptopt=$f")
  done
  # no manuals, documentation (but the copyrights) or translations: a quarter less
  mmdebstrap --quiet --variant=apt --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -f "$1/etc/apt/apt.conf.d/99mmdebstrap"' \
    "${aptopts[@]}" "$SUITE" "$OUT/rootfs.tar" "${sources[@]}"
  podman import --quiet "$OUT/rootfs.tar" "$BASE" >/dev/null
  rm -f "$OUT/rootfs.tar"
  echo "make image: base $BASE in $((SECONDS - t)) s"
fi
base_py=$(podman run --rm "$BASE" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
wheel_py=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$base_py" != "$wheel_py" ]; then
  echo "make image: the base's python3 is $base_py but $PY is $wheel_py: the wheel would not install" \
    "(SUITE=$SUITE; build with a $base_py venv: make image PYTHON=python$base_py)" >&2
  exit 1
fi

# ------------------------------------------------------------------------------------------ 2. the wheel
t=$SECONDS
rm -rf "$OUT/context" && mkdir -p "$OUT/context"
printf '[build_ext]\nparallel = %s\n' "$(nproc)" >"$OUT/build-jobs.cfg"
DIST_EXTRA_CONFIG="$OUT/build-jobs.cfg" "$PY" -m pip wheel --quiet --no-deps --no-build-isolation \
  --wheel-dir "$OUT/context" .
echo "make image: wheel in $((SECONDS - t)) s"

# ------------------------------------------------------------------------------------------ 3. the image
t=$SECONDS
"$PY" deploy/image/pip_config.py "$OUT/context/pip" /run/kip714-context/pip
# --no-cache: a cached layer would keep an older wheel (a bind mount's content is not part of the cache key);
# the image it replaces is then dangling, and pruned (only kip714's: the label)
podman build --quiet --no-cache --pull=never --network=host --build-arg "BASE=$BASE" \
  --file deploy/image/Containerfile --tag "$IMAGE:$version" --tag "$IMAGE:latest" "$OUT/context" >/dev/null
rm -rf "$OUT/context/pip"
podman image prune --force --filter label=org.opencontainers.image.title=kip714 >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$IMAGE:$version")
echo "make image: $IMAGE:$version in $((SECONDS - t)) s, $((size / 1000000)) MB; make image took" \
  "$((SECONDS - start)) s"
