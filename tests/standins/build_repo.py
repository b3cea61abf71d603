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

Usage: python build_repo.py [--sign-with GNUPGHOME] [--debian NAME ...] OUT_DIR SPEC.yml [SPEC.yml ...]
    --sign-with  sign Release (InRelease) with the one key in GNUPGHOME, made there on first use (a throw-away
                 test key without passphrase, so that several repositories of a scenario share it); its public half
                 goes to OUT_DIR/key.asc and its fingerprint to GNUPGHOME/fingerprint.txt
    --debian     add Debian's NAME and what the node image lacks for it (e.g. gpg, which the roles read keys with)
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from railforge.testbed.aptrepo import download, node_closure, write_index

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


def sign_release(repo: Path, gnupg_home: Path) -> str:
    """Clear-sign repo/Release into InRelease with the key of gnupg_home (made on first use), export its public half
    to repo/key.asc; returns its fingerprint."""
    gpg = ["gpg", "--batch", "--quiet", "--homedir", str(gnupg_home)]
    fingerprint_file = gnupg_home / "fingerprint.txt"
    try:
        if not fingerprint_file.exists():
            gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
            user_id = "Railforge stand-in repositories (test only)"
            subprocess.run(
                [*gpg, "--passphrase", "", "--quick-generate-key", user_id, "ed25519", "sign", "never"],
                check=True,
                capture_output=True,
            )
            colons = subprocess.run([*gpg, "--with-colons", "--list-keys"], check=True, capture_output=True, text=True)
            fingerprint_file.write_text(next(r.split(":")[9] for r in colons.stdout.splitlines() if r[:4] == "fpr:"))
        fingerprint = fingerprint_file.read_text().strip()
        (repo / "InRelease").unlink(missing_ok=True)
        subprocess.run([*gpg, "--clearsign", "--output", str(repo / "InRelease"), str(repo / "Release")], check=True)
        (repo / "key.asc").write_bytes(
            subprocess.run([*gpg, "--armor", "--export", fingerprint], check=True, capture_output=True).stdout
        )
    finally:
        # gpg started an agent for this home: stop it, so that no process outlives the build.
        subprocess.run(["gpgconf", "--homedir", str(gnupg_home), "--kill", "gpg-agent"], check=False)
    return fingerprint


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sign-with", type=Path, metavar="GNUPGHOME")
    parser.add_argument("--debian", action="append", default=[], metavar="NAME")
    parser.add_argument("out", type=Path)
    parser.add_argument("specs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    out = args.out
    shutil.rmtree(out / "pool", ignore_errors=True)  # a full rebuild: no package of an earlier spec stays indexed
    (out / "pool").mkdir(parents=True)
    for spec in args.specs:
        for entry in yaml.safe_load(spec.read_text())["packages"]:
            for package in expand_versions(entry):
                build_package(package, out / "pool", spec.parent)
    if args.debian:
        download(node_closure(args.debian), out / "pool")
    write_index(out, "railforge-standins")
    signed = f", signed by {sign_release(out, args.sign_with)}" if args.sign_with else ""
    print(f"stand-in repository: {len(list((out / 'pool').glob('*.deb')))} packages in {out}{signed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
