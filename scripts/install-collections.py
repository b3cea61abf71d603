"""Install the pinned Ansible collections without Galaxy.

Reads collections/requirements.yml, downloads the `ansible` community wheel pinned in collections/offline-
bundle.yml from PyPI (sha256 checked), and extracts only the listed collections into
collections/ansible_collections. A collection already present at the pinned version is left alone, so a
second run costs nothing.
"""

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "collections" / "ansible_collections"


def installed_version(name: str) -> str | None:
    manifest = TARGET.joinpath(*name.split("."), "MANIFEST.json")
    if not manifest.exists():
        return None
    return json.loads(manifest.read_text())["collection_info"]["version"]


def main() -> int:
    spec = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())
    bundle = yaml.safe_load((ROOT / "collections" / "offline-bundle.yml").read_text())
    missing = [c for c in spec["collections"] if installed_version(c["name"]) != c["version"]]
    if not missing:
        print("collections: all pinned versions present")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                f"{bundle['name']}=={bundle['version']}",
                "-d",
                tmp,
            ],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != bundle["sha256"]:
            print(f"collections: {wheel.name} sha256 {digest} != pinned {bundle['sha256']}", file=sys.stderr)
            return 1
        with zipfile.ZipFile(wheel) as archive:
            for collection in missing:
                prefix = "ansible_collections/" + collection["name"].replace(".", "/") + "/"
                shutil.rmtree(TARGET.parent / prefix, ignore_errors=True)
                archive.extractall(TARGET.parent, [n for n in archive.namelist() if n.startswith(prefix)])
                found = installed_version(collection["name"])
                if found != collection["version"]:
                    print(
                        f"collections: {collection['name']} is {found} in the bundle, pinned "
                        f"{collection['version']}",
                        file=sys.stderr,
                    )
                    return 1
                print(f"collections: installed {collection['name']} {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
