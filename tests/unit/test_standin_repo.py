"""The stand-in apt repository builder produces installable, indexed packages with the declared shape."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SPEC = """
packages:
  - name: vendor-tool
    version: 2.1-1
    files:
      /usr/bin/vendor-tool: {mode: "0755", content: "#!/bin/sh\\necho 2.1\\n"}
  - name: vendor-meta
    version: 2.1-1
    depends: [vendor-tool (= 2.1-1)]
    provides: [vendor]
    postinst: |
      touch /var/lib/vendor-meta
"""


def build(tmp_path: Path, spec_text: str) -> Path:
    """Build the repository of one spec; returns its directory."""
    spec = tmp_path / "spec.yml"
    spec.write_text(spec_text)
    out = tmp_path / "repo"
    subprocess.run([sys.executable, ROOT / "tests/standins/build_repo.py", out, spec], check=True)
    return out


def test_builds_indexed_repository_with_dependency_shape(tmp_path):
    out = build(tmp_path, SPEC)
    index = (out / "Packages").read_text()
    assert "Package: vendor-tool\nVersion: 2.1-1" in index
    assert "Depends: vendor-tool (= 2.1-1)" in index
    assert "Provides: vendor" in index
    assert "SHA256:" in (out / "Release").read_text()
    deb = out / "pool/vendor-tool_2.1-1_amd64.deb"
    listing = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True, text=True).stdout
    assert "-rwxr-xr-x root/root" in listing and "./usr/bin/vendor-tool" in listing
    scripts = subprocess.run(
        ["dpkg-deb", "-I", out / "pool/vendor-meta_2.1-1_amd64.deb"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "postinst" in scripts


def test_one_entry_builds_every_listed_version_with_its_own_dependencies(tmp_path):
    spec = """
packages:
  - name: driver-meta
    versions: [580.95.05-1, 580.105.08-1]
    depends:
      - driver-libs (= {version})
      - driver-tools (>= {upstream})
"""
    index = (build(tmp_path, spec) / "Packages").read_text()
    assert "Depends: driver-libs (= 580.105.08-1), driver-tools (>= 580.105.08)" in index
    assert "Depends: driver-libs (= 580.95.05-1), driver-tools (>= 580.95.05)" in index
    assert sorted((tmp_path / "repo/pool").iterdir()) == [
        tmp_path / "repo/pool/driver-meta_580.105.08-1_amd64.deb",
        tmp_path / "repo/pool/driver-meta_580.95.05-1_amd64.deb",
    ]


def test_repositories_built_with_one_signing_home_are_signed_by_one_key_apt_can_check(tmp_path):
    """--sign-with: the key is made by the first build and reused by the next; InRelease verifies against key.asc,
    whose primary key has the fingerprint the scenario reads, and a Release changed afterwards no longer verifies."""
    spec = tmp_path / "spec.yml"
    spec.write_text(SPEC)
    home = tmp_path / "signing-key"
    builder = [sys.executable, ROOT / "tests/standins/build_repo.py", "--sign-with", home]
    for name in ("first", "second"):
        subprocess.run([*builder, tmp_path / name, spec], check=True, capture_output=True)
    fingerprint = (home / "fingerprint.txt").read_text().strip()
    assert len(fingerprint) == 40
    reader = tmp_path / "reader"  # a gpg home of its own: the key is read as a node reads it, knowing no key
    reader.mkdir(mode=0o700)
    for name in ("first", "second"):
        repo = tmp_path / name
        shown = subprocess.run(
            ["gpg", "--batch", "--homedir", reader, "--show-keys", "--with-colons", repo / "key.asc"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert f"\nfpr:::::::::{fingerprint}:" in shown
        keyring = tmp_path / f"{name}.gpg"
        keyring.write_bytes(
            subprocess.run(["gpg", "--dearmor"], input=(repo / "key.asc").read_bytes(), capture_output=True).stdout
        )
        verified = subprocess.run(["gpgv", "--keyring", keyring, repo / "InRelease"], capture_output=True, text=True)
        assert verified.returncode == 0, verified.stderr
        assert (repo / "Release").read_text() in (repo / "InRelease").read_text()
    inrelease = tmp_path / "first/InRelease"
    inrelease.write_text(inrelease.read_text().replace("Origin: railforge-standins", "Origin: someone-else"))
    assert subprocess.run(["gpgv", "--keyring", tmp_path / "first.gpg", inrelease], capture_output=True).returncode
