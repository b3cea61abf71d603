#!/usr/bin/env bash
# Build the lab's OpenMPI image (versions_openmpi_image in roles/versions) from deploy/openmpi/ and the base image
# the tests build (molecule/image/build.sh). Prints the image name. A build is skipped when the image already carries
# the hash of its inputs (this directory's image files and the base image's ID). RAILFORGE_OPENMPI_ARCHIVE=FILE also
# saves it as a docker archive (for `ctr images import`).
set -euo pipefail
cd "$(dirname "$0")/../.."

image=$(sed -n 's/^versions_openmpi_image: *"\(.*\)"$/\1/p' roles/versions/defaults/main.yml)
if [[ -z $image ]]; then
    echo "build.sh: no versions_openmpi_image: \"REGISTRY/NAME:TAG\" line in roles/versions/defaults/main.yml" >&2
    exit 1
fi
base=$(cat molecule/image/TAG)
podman image exists "$base" || molecule/image/build.sh >&2

# the job template and this script do not go into the image
inputs=$( (
    find deploy/openmpi -type f ! -name build.sh ! -name '*.j2' -print0 | sort -z | xargs -0 sha256sum
    podman image inspect --format '{{.Id}}' "$base"
) | sha256sum | cut -d' ' -f1)
built_from=$(podman image inspect --format '{{index .Labels "io.railforge.inputs"}}' "$image" 2>/dev/null || true)
if [[ $built_from != "$inputs" ]]; then
    previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    podman build --quiet --build-arg "BASE=$base" --label "io.railforge.inputs=$inputs" \
        --file deploy/openmpi/Containerfile --tag "$image" deploy/openmpi >/dev/null
    if [[ -n $previous && $previous != $(podman image inspect --format '{{.Id}}' "$image") ]]; then
        podman rmi "$previous" >/dev/null 2>&1 || true # the last build, now untagged; kept only while a container uses it
    fi
fi
if [[ -n ${RAILFORGE_OPENMPI_ARCHIVE:-} ]]; then
    rm -f "$RAILFORGE_OPENMPI_ARCHIVE"  # podman save does not overwrite a docker archive
    podman save --quiet --format docker-archive --output "$RAILFORGE_OPENMPI_ARCHIVE" "$image"
fi
echo "$image"
