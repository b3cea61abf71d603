"""The lab repository's pure parts: control texts, the Debian names to resolve, apt's simulation, Release, pins."""

import hashlib
from pathlib import Path

import pytest

from railforge.testbed import aptrepo


def package(**fields) -> aptrepo.Package:
    defaults = {"name": "demo", "version": "1.0-1", "section": "admin", "description": "demo\n more", "files": {}}
    return aptrepo.Package(**(defaults | fields))


def test_control_text_writes_only_the_fields_a_package_has():
    control = aptrepo.control_text(package(depends=("mount",)), "libc6 (>= 2.34)")
    maintainer = f"Maintainer: {aptrepo.MAINTAINER}"
    assert control.splitlines()[:4] == ["Package: demo", "Version: 1.0-1", "Architecture: amd64", maintainer]
    assert "Depends: libc6 (>= 2.34), mount\n" in control
    for absent in ("Recommends:", "Provides:", "Conflicts:", "Replaces:"):
        assert absent not in control
    assert control.endswith("Description: demo\n more\n")


def test_a_package_that_provides_debians_names_also_conflicts_with_and_replaces_them():
    control = aptrepo.control_text(package(name="containerd.io", provides=("containerd", "runc")))
    for field in ("Provides", "Conflicts", "Replaces"):
        assert f"{field}: containerd, runc\n" in control


def test_conffiles_are_the_files_under_etc():
    files = {"/usr/bin/demo": Path("a"), "/etc/default/demo": Path("b"), "/etc/demo/config.toml": Path("c")}
    assert package(files=files).conffiles == ["/etc/default/demo", "/etc/demo/config.toml"]


def test_debian_requirements_leave_out_our_own_packages_and_versions_then_add_the_extras():
    controls = [
        "Package: kubelet\nDepends: mount, util-linux\nRecommends: iptables (>= 1.8.4)\n",
        "Package: kubeadm\nDepends: kubelet (>= 1.19.0), mount\n",
        "Package: containerd.io\nDepends: libc6 (>= 2.34), libseccomp2 (>= 2.5.0)\n",
    ]
    wanted = aptrepo.debian_requirements(controls)
    assert wanted[:5] == ["mount", "util-linux", "iptables", "libc6", "libseccomp2"]
    assert "kubelet" not in wanted
    assert wanted[5:] == [name for name in aptrepo.NODE_EXTRAS if name != "iptables"]


def test_parse_simulation_reads_new_and_upgraded_packages_with_epochs():
    output = """Reading package lists...
Inst netbase (6.4 Debian:12.15/oldstable [all])
Inst conntrack (1:1.4.7-1+b2 Debian:12.15/oldstable [amd64])
Inst libc6 [2.36-9+deb12u9] (2.36-9+deb12u13 Debian:12.15/oldstable [amd64])
Conf netbase (6.4 Debian:12.15/oldstable [all])
"""
    assert aptrepo.parse_simulation(output) == {
        "netbase": "6.4",
        "conntrack": "1:1.4.7-1+b2",
        "libc6": "2.36-9+deb12u13",
    }


def test_release_lists_the_sha256_and_size_of_both_indexes(tmp_path):
    (tmp_path / "Packages").write_bytes(b"Package: demo\n")
    (tmp_path / "Packages.gz").write_bytes(b"\x1f\x8bdemo")
    release = aptrepo.release_text(tmp_path, "Railforge lab", "Tue, 24 Nov 2026 05:00:00 GMT")
    assert release.startswith("Origin: Railforge lab\nLabel: Railforge lab\n")
    assert "Date: Tue, 24 Nov 2026 05:00:00 GMT\n" in release
    for name, data in (("Packages", b"Package: demo\n"), ("Packages.gz", b"\x1f\x8bdemo")):
        assert f" {hashlib.sha256(data).hexdigest()} {len(data):>9} {name}\n" in release


@pytest.mark.parametrize("value", ["", "1.1 ", "v1.36.5", "1_1", "1-1"])
def test_a_pin_debian_cannot_take_in_a_version_is_refused_by_name(monkeypatch, value):
    pins = aptrepo.pinned_versions() | {"versions_kubernetes_package_revision": value}
    monkeypatch.setattr(aptrepo, "pinned_versions", lambda: pins)
    with pytest.raises(SystemExit, match=r"versions_kubernetes_package_revision in roles/versions/defaults/main\.yml"):
        aptrepo.packages()
