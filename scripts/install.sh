#!/usr/bin/env bash
# The machine running Ansible: .venv with the pinned runtime of the playbooks (requirements.txt), this package and
# the pinned collections (scripts/install-collections.py). Needs this checkout and Python 3.11 to 3.13 with venv;
# no root, no podman, no Go, no Galaxy. pip reads its usual settings: PIP_INDEX_URL for a mirror of PyPI, or
# PIP_NO_INDEX=1 with PIP_FIND_LINKS=DIR for the wheels `--download DIR` fetched on a machine that reaches PyPI (the
# same OS, architecture and Python minor). `make setup` installs the development toolchain the same way.
#   scripts/install.sh                      install (a second run takes seconds)
#   scripts/install.sh requirements-dev.txt the development toolchain instead (a superset)
#   scripts/install.sh --download DIR       the wheels an install needs, into DIR
set -euo pipefail
cd "$(dirname "$0")/.."
python=${RAILFORGE_PYTHON:-python3}
started=$SECONDS

version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) ||
    { echo "install: $python does not run; set RAILFORGE_PYTHON to a Python 3.11 to 3.13" >&2; exit 2; }
case $version in
3.11 | 3.12 | 3.13) ;;
*)
    echo "install: $python is Python $version; the machine running Ansible needs 3.11 to 3.13 (ansible-core 2.19's" \
        "controller range): set RAILFORGE_PYTHON to one" >&2
    exit 2
    ;;
esac

if [[ ${1:-} == --download ]]; then
    dir=${2:?usage: $0 --download DIR}
    mkdir -p "$dir"
    # the pinned build backend of this package (pyproject.toml) and the collections' wheel (offline-bundle.yml)
    backend=$("$python" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"])')
    bundle=$(sed -n 's/^name: //p' collections/offline-bundle.yml)==$(sed -n 's/^version: //p' collections/offline-bundle.yml)
    # a throw-away venv's pip: the system Python may have none
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    "$python" -m venv "$scratch"
    pip=("$scratch/bin/pip" download --quiet --disable-pip-version-check -d "$dir")
    "${pip[@]}" -r requirements.txt "$backend"
    "${pip[@]}" --no-deps --only-binary=:all: "$bundle"
    echo "install: the wheels for requirements.txt, $backend and $bundle are in $dir ($((SECONDS - started)) s)"
    exit 0
fi

requirements=${1:-requirements.txt}
[[ -f $requirements ]] || { echo "install: no requirements file $requirements" >&2; exit 2; }
stamp=.venv/.requirements.sha256
wanted="$requirements $(cat requirements.txt "$requirements" pyproject.toml | sha256sum | cut -d' ' -f1)"
if [[ ! -f $stamp || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "python: installing $requirements and this package into .venv"
    "$python" -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r "$requirements" -e .
    echo "$wanted" >"$stamp"
else
    echo "python: .venv up to date ($requirements)"
fi
.venv/bin/python scripts/install-collections.py
echo "install: done in $((SECONDS - started)) s. Next: source .venv/bin/activate, then" \
    "ansible-playbook -i inventories/<yours>/hosts.yml playbooks/site.yml"
