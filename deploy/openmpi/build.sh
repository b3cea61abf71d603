#!/usr/bin/env bash
# Build a job image of deploy/openmpi/Containerfile from the base image the tests build (molecule/image/build.sh):
# TARGET openmpi (the default; the lab's allreduce MPIJob, versions_openmpi_image) or resnet50 (the ResNet-50
# benchmark, versions_resnet50_image), under the name roles/versions pins. Prints the image name. A build is skipped
# when the image already carries the hash of its inputs (the target, this directory's image files and the base
# image's ID). RAILFORGE_IMAGE_ARCHIVE=FILE also saves it as a docker archive (for `ctr images import`).
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${1:-openmpi}
if [[ ! $target =~ ^(openmpi|resnet50)$ ]]; then
    echo "usage: deploy/openmpi/build.sh [openmpi|resnet50]" >&2
    exit 2
fi
image=$(sed -n "s/^versions_${target}_image: *\"\(.*\)\"$/\1/p" roles/versions/defaults/main.yml)
if [[ -z $image ]]; then
    echo "build.sh: no versions_${target}_image: \"REGISTRY/NAME:TAG\" line in roles/versions/defaults/main.yml" >&2
    exit 1
fi
base=$(cat molecule/image/TAG)
podman image exists "$base" || molecule/image/build.sh >&2

# the job template and this script do not go into the image
inputs=$( (
    echo "$target"
    find deploy/openmpi -type f ! -name build.sh ! -name '*.j2' -print0 | sort -z | xargs -0 sha256sum
    podman image inspect --format '{{.Id}}' "$base"
) | sha256sum | cut -d' ' -f1)
built_from=$(podman image inspect --format '{{index .Labels "io.railforge.inputs"}}' "$image" 2>/dev/null || true)
if [[ $built_from != "$inputs" ]]; then
    previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    podman build --quiet --build-arg "BASE=$base" --label "io.railforge.inputs=$inputs" --target "$target" \
        --file deploy/openmpi/Containerfile --tag "$image" deploy/openmpi >/dev/null
    if [[ -n $previous && $previous != $(podman image inspect --format '{{.Id}}' "$image") ]]; then
        podman rmi "$previous" >/dev/null 2>&1 || true # the last build, now untagged; kept only while a container uses it
    fi
fi
if [[ -n ${RAILFORGE_IMAGE_ARCHIVE:-} ]]; then
    rm -f "$RAILFORGE_IMAGE_ARCHIVE"  # podman save does not overwrite a docker archive
    podman save --quiet --format docker-archive --output "$RAILFORGE_IMAGE_ARCHIVE" "$image"
fi
echo "$image"
