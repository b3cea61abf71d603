"""Build a flat `file:` apt repository of stand-in vendor packages from a YAML description.

Stand-ins carry the real package names, versions and dependency shape of vendor repositories (CUDA, DOCA,
container toolkit) and install small scripts in place of the real binaries. Test-only.

Spec (YAML):
    packages:
      - name: nvidia-driver-580-open
        version: 580.95.05-0ubuntu1
        architecture: amd64            # default amd64
        depends: [nvidia-kernel-source-580-open (= 580.95.05-0ubuntu1)]
        provides: [nvidia-driver]
        conflicts: []
        description: stand-in for the NVIDIA 580 open driver meta package
        files:                         # path -> text, or path -> {content | source, mode}
          /usr/bin/nvidia-smi: {mode: "0755", content: "#!/bin/sh\necho stand-in\n"}
          /usr/bin/dcgmi: {mode: "0755", source: bin/dcgmi}   # a file relative to the spec
        postinst: |                    # optional maintainer script body
          systemctl daemon-reload || true
      - name: libnvidia-nscq           # one entry, several versions: {version} and {upstream} (the version
        versions: [580.95.05-1, 580.105.08-1]   # without its revision) are filled in every string field
        depends: [libnvidia-ml1 (= {version})]

Usage: python build_repo.py OUT_DIR SPEC.yml [SPEC.yml ...]
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from railforge.testbed.aptrepo import write_index

CONTROL_FIELDS = (("depends", "Depends"), ("provides", "Provides"), ("conflicts", "Conflicts"))


def control_text(package: dict) -> str:
    lines = [
        f"Package: {package['name']}",
        f"Version: {package['version']}",
        f"Architecture: {package.get('architecture', 'amd64')}",
        "Maintainer: Railforge tests <tests@railforge.invalid>",
        "Section: misc",
        "Priority: optional",
    ]
    lines += [f"{field}: {', '.join(package[key])}" for key, field in CONTROL_FIELDS if package.get(key)]
    lines.append(f"Description: {package.get('description', 'Railforge test stand-in')}")
    return "\n".join(lines) + "\n"


def expand_versions(package: dict) -> list[dict]:
    """One package per entry of `versions`, with {version} and {upstream} filled in its strings and lists."""
    if "versions" not in package:
        return [package]

    def fill(value, version: str):
        if isinstance(value, str):
            return value.replace("{version}", version).replace("{upstream}", version.rsplit("-", 1)[0])
        if isinstance(value, list):
            return [fill(item, version) for item in value]
        return value

    template = {key: value for key, value in package.items() if key != "versions"}
    return [
        {key: fill(value, version) for key, value in template.items()} | {"version": version}
        for version in package["versions"]
    ]


def build_package(package: dict, pool: Path, spec_dir: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN/control").write_text(control_text(package))
        if package.get("postinst"):
            script = root / "DEBIAN/postinst"
            script.write_text("#!/bin/sh\nset -e\n" + package["postinst"])
            script.chmod(0o755)
        for path, entry in (package.get("files") or {}).items():
            entry = entry if isinstance(entry, dict) else {"content": entry}
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text((spec_dir / entry["source"]).read_text() if "source" in entry else entry["content"])
            target.chmod(int(str(entry.get("mode", "0644")), 8))
        deb = pool / f"{package['name']}_{package['version']}_{package.get('architecture', 'amd64')}.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
            check=True,
            capture_output=True,
        )
    return deb


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    shutil.rmtree(out / "pool", ignore_errors=True)  # a full rebuild: no package of an earlier spec stays indexed
    (out / "pool").mkdir(parents=True)
    for spec in argv[1:]:
        for entry in yaml.safe_load(Path(spec).read_text())["packages"]:
            for package in expand_versions(entry):
                build_package(package, out / "pool", Path(spec).parent)
    write_index(out, "railforge-standins")
    print(f"stand-in repository: {len(list((out / 'pool').glob('*.deb')))} packages in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
