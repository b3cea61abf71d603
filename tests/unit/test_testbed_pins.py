"""The test bed builds what the versions file pins: every wrapper module under tools/ requires that version."""

import pytest

from railforge.cliargs import UsageError
from railforge.testbed import build
from railforge.testbed.build import (
    ALL_COMPONENTS,
    KUBERNETES,
    TOOLS,
    check_wrappers,
    component,
    pinned_versions,
    previous_patch,
    required_version,
)


def test_every_wrapper_requires_the_pinned_version():
    assert check_wrappers() == []


def test_every_pinned_component_has_a_wrapper_with_a_go_sum():
    for comp in ALL_COMPONENTS:
        assert (TOOLS / comp.tool_dir / "go.sum").stat().st_size > 0, comp.name
        assert comp.version == pinned_versions()[comp.version_key]


def test_required_version_reads_single_lines_and_blocks():
    go_mod = "module x\n\nrequire k8s.io/kubernetes v1.36.5\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.6.16\n)\n"
    assert required_version(go_mod, "k8s.io/kubernetes") == "v1.36.5"
    assert required_version(go_mod, "go.etcd.io/etcd/server/v3") == "v3.6.16"
    assert required_version(go_mod, "go.etcd.io/etcd/server") is None  # a prefix of a path is not the module


def test_a_wrapper_behind_the_versions_file_is_named_with_the_fix(monkeypatch):
    pins = {**pinned_versions(), "versions_etcd": "3.6.99"}
    monkeypatch.setattr("railforge.testbed.build.pinned_versions", lambda: pins)
    problems = check_wrappers()
    assert len(problems) == 1
    assert "tools/etcd/go.mod requires go.etcd.io/etcd/server/v3 v3.6.16" in problems[0]
    assert "versions_etcd" in problems[0] and "v3.6.99" in problems[0]


def test_the_podgroup_crd_pin_is_the_scheduler_plugins_release_the_mpi_operator_requires():
    pins = pinned_versions()
    wanted = "v" + pins["versions_scheduler_plugins"]
    go_mod = (TOOLS / "mpi-operator" / "go.mod").read_text()
    assert required_version(go_mod, "sigs.k8s.io/scheduler-plugins") == wanted, (
        f"tools/mpi-operator/go.mod requires another sigs.k8s.io/scheduler-plugins than versions_scheduler_plugins"
        f" ({wanted}): update versions_scheduler_plugins, versions_podgroup_crd_url and versions_podgroup_crd_checksum"
    )
    assert f"/scheduler-plugins/{wanted}/" in pins["versions_podgroup_crd_url"]


def test_the_stand_in_of_the_patch_release_before_the_pin_is_built_from_the_pinned_source():
    assert previous_patch("1.36.5") == "1.36.4"
    assert previous_patch("1.37.10") == "1.37.9"
    assert previous_patch("1.37.0") is None  # a .0 release: the lab has nothing to upgrade from
    stand_in = component("kubernetes-previous-patch")
    assert stand_in.version == KUBERNETES.version  # the module it builds: the pinned release's
    assert stand_in.stamped_version == previous_patch(KUBERNETES.version)  # what its binaries report
    assert (stand_in.binaries, stand_in.tool_dir) == (KUBERNETES.binaries, KUBERNETES.tool_dir)
    assert stand_in.out_dir != KUBERNETES.out_dir


def test_a_dot_zero_pin_has_no_stand_in_to_upgrade_from(monkeypatch):
    monkeypatch.setattr(build, "pinned_versions", lambda: {**pinned_versions(), "versions_kubernetes": "1.37.0"})
    with pytest.raises(UsageError, match=r"versions_kubernetes 1\.37\.0 is a \.0 release"):
        _ = component("kubernetes-previous-patch").stamped_version
