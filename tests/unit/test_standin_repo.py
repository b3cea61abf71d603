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


def test_builds_indexed_repository_with_dependency_shape(tmp_path):
    spec = tmp_path / "spec.yml"
    spec.write_text(SPEC)
    out = tmp_path / "repo"
    subprocess.run([sys.executable, ROOT / "tests/standins/build_repo.py", out, spec], check=True)
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
