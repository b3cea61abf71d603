#!/usr/bin/env bash
# Build the scheduler's image locally: REGISTRY/railforge-scheduler:TAG as pinned in roles/versions (the role's
# default image). Needs podman and the project's .venv (scripts/install.sh or make setup). The base is the test
# image (molecule/image/build.sh makes it, as root) unless RAILFORGE_SCHEDULER_BASE names another: any image whose
# python3 is the .venv's version (Debian 12's is 3.11); the build then checks that the scheduler imports in it.
# Prints the image name; RAILFORGE_SCHEDULER_ARCHIVE=FILE also saves it as a docker archive (for `ctr images import`).
set -euo pipefail
cd "$(dirname "$0")/../.."

image=$(.venv/bin/python - <<'PY'
import yaml
pins = yaml.safe_load(open("roles/versions/defaults/main.yml"))
print(f"{pins['versions_railforge_scheduler_registry']}/railforge-scheduler:{pins['versions_railforge_scheduler_tag']}")
PY
)
base=${RAILFORGE_SCHEDULER_BASE:-$(cat molecule/image/TAG)}
if [[ -z ${RAILFORGE_SCHEDULER_BASE:-} ]]; then
    podman image exists "$base" || molecule/image/build.sh
fi

context=$(mktemp -d /var/tmp/railforge-scheduler-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
pip=(.venv/bin/pip --quiet --disable-pip-version-check)
"${pip[@]}" wheel --no-deps --wheel-dir "$context/wheels" .
# The scheduler needs only PyYAML of the project's dependencies, and its 'scheduler' extra; at the versions the
# tests ran with.
mapfile -t needs < <(.venv/bin/python - <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for need in [*project["optional-dependencies"]["scheduler"], *project["dependencies"]]:
    if not need.startswith(("matplotlib", "tqdm")):  # the simulator's plots and progress bars
        print(need)
PY
)
.venv/bin/pip freeze --exclude-editable > "$context/constraints.txt"
"${pip[@]}" install --target "$context/site" --no-deps "$context"/wheels/railforge-*.whl
rm -rf "$context/site/bin"  # the console script: the image runs python3 -m railforge.cli
"${pip[@]}" install --target "$context/site" --only-binary=:all: --constraint "$context/constraints.txt" "${needs[@]}"
previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
podman build --quiet --build-arg "BASE=$base" --file deploy/scheduler/Containerfile --tag "$image" "$context" >/dev/null
if [[ -n ${RAILFORGE_SCHEDULER_BASE:-} ]] &&
    ! podman run --rm --network none --entrypoint python3 "$image" -c "import railforge.k8s.adapter" >/dev/null; then
    podman rmi "$image" >/dev/null
    [[ -z $previous ]] || podman tag "$previous" "$image"  # the last build keeps the name
    echo "deploy/scheduler/build.sh: the scheduler does not import on $base: RAILFORGE_SCHEDULER_BASE needs the" \
        "python3 of this .venv ($(.venv/bin/python -c 'import sys; print(*sys.version_info[:2], sep=".")'))" >&2
    exit 1
fi
if [[ -n $previous && $previous != $(podman image inspect --format '{{.Id}}' "$image") ]]; then
    podman rmi "$previous" >/dev/null 2>&1 || true  # the last build, now untagged; kept only while a container uses it
fi
if [[ -n ${RAILFORGE_SCHEDULER_ARCHIVE:-} ]]; then
    rm -f "$RAILFORGE_SCHEDULER_ARCHIVE"  # podman save does not overwrite a docker archive
    podman save --quiet --format docker-archive --output "$RAILFORGE_SCHEDULER_ARCHIVE" "$image"
fi
echo "$image"
