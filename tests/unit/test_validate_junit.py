"""railforge.validate's reading of the node checks' JUnit XML: the node from the property tests/infra records, the
check's own parameters kept apart from it; the quarantine of failed nodes when no kubeconfig is there, and its note."""

import argparse
import json
import os
import subprocess
import sys

import pytest
import yaml

from railforge.k8s.annotations import QUARANTINE, Quarantine
from railforge.validate import main, parse_junit, quarantine_failing

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test_gpu" name="test_repository_signature_checked_by_apt[ansible://lab-cp-01-/etc/apt/x.list-v]">
<properties><property name="node" value="lab-cp-01" /></properties><skipped message="no such source" /></testcase>
<testcase classname="test_gpu" name="test_driver_loaded[podman://lab-node-01]">
<properties><property name="node" value="lab-node-01" /></properties><failure message="no nvidia module&#10;more" />
</testcase>
<testcase classname="test_gpu" name="test_driver_loaded[podman://lab-cp-01]">
<properties><property name="node" value="lab-cp-01" /></properties></testcase>
<testcase classname="test_pure" name="test_no_host" />
</testsuite></testsuites>"""


def test_each_check_is_counted_on_its_node_with_its_parameters_named(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    assert parse_junit(junit) == {
        "lab-cp-01": {
            "passed": ["test_driver_loaded"],
            "failed": {},
            "skipped": {"test_repository_signature_checked_by_apt[/etc/apt/x.list-v]": "no such source"},
        },
        "lab-node-01": {"passed": [], "failed": {"test_driver_loaded": "no nvidia module"}, "skipped": {}},
    }


def test_failed_nodes_are_left_as_they_are_without_a_kubeconfig_and_said_so(tmp_path, capsys):
    args = argparse.Namespace(kubeconfig=str(tmp_path / "missing.conf"), json_path="r.json", quarantine="finish")
    quarantine_failing({"dgx-01": ["check gpu_ecc"], "dgx-02": ["floor: allreduce"]}, args)
    assert capsys.readouterr().out == (
        f"quarantine: no kubeconfig '{tmp_path}/missing.conf'; failed nodes left as they are: dgx-01, dgx-02\n"
    )
    quarantine_failing({}, args)  # nothing failed: nothing said
    assert capsys.readouterr().out == ""


def test_a_quarantine_note_reads_back_and_an_unreadable_one_is_kept_as_what_failed():
    note = Quarantine(("check gpu_ecc",), "reports/validate-lab.json", "2026-11-29T19:00:00Z")
    assert Quarantine.decode({QUARANTINE: note.encode()}) == note
    assert Quarantine.decode({QUARANTINE: "ECC errors"}) == Quarantine(("ECC errors",), "", "")
    assert Quarantine.decode({}) is None


NODE_CONFTEST = """
import os


def pytest_generate_tests(metafunc):
    if "node" in metafunc.fixturenames:  # tests/infra's hosts, as its conftest takes them from railforge.validate
        metafunc.parametrize("node", [os.environ["RAILFORGE_HOSTS"]])


def pytest_collection_modifyitems(items):
    for item in items:
        item.user_properties.append(("node", item.callspec.params["node"]))
"""

BARRIER_CHECK = """
import time
from pathlib import Path

ARRIVED = Path({arrived!r})


def test_every_node_is_checked_at_once(node):
    (ARRIVED / node).touch()
    deadline = time.monotonic() + 120
    while len(list(ARRIVED.iterdir())) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(list(ARRIVED.iterdir())) == 3


def test_gpu_count(node):
    assert node != "dgx-02", "2 GPUs found, 8 expected"
"""


def test_nodes_are_checked_at_once_each_in_its_own_run_and_joined_per_node(tmp_path):
    """Three hosts, --jobs 3: each host's checks meet the other two's at a barrier, which a run of one host after the
    other would never pass; one host's failure is its own, and a host whose checks cannot run (a check directory
    that cannot be collected, or is missing) fails."""
    checks, arrived = tmp_path / "checks", tmp_path / "arrived"
    checks.mkdir()
    arrived.mkdir()
    (checks / "conftest.py").write_text(NODE_CONFTEST)
    (checks / "test_barrier.py").write_text(BARRIER_CHECK.format(arrived=str(arrived)))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": dict.fromkeys(("dgx-01", "dgx-02", "stor-01"))}}))
    report = tmp_path / "validate.json"
    argv = ["--inventory", str(inventory), "--checks", str(checks), "--json", str(report), "--jobs", "3"]
    assert main(argv) == 1
    nodes = json.loads(report.read_text())
    assert sorted(nodes) == ["dgx-01", "dgx-02", "stor-01"]
    for host, result in nodes.items():
        assert "test_every_node_is_checked_at_once" in result["passed"], (host, result)
    assert nodes["dgx-02"]["failed"] == {"test_gpu_count": "AssertionError: 2 GPUs found, 8 expected"}
    assert not nodes["dgx-01"]["failed"] and not nodes["stor-01"]["failed"]
    (checks / "conftest.py").write_text("raise SystemExit(3)\n")  # pytest cannot even collect
    assert main([*argv[:-2], "--limit", "stor-01"]) == 1
    assert json.loads(report.read_text())["stor-01"]["failed"] == {"checks": "did not run (pytest exited 3)"}
    assert main([*argv[:-2], "--limit", "stor-01", "--checks", str(tmp_path / "missing")]) == 1
    assert json.loads(report.read_text())["stor-01"]["failed"] == {"checks": "did not run (pytest exited 4)"}


def test_the_checks_run_from_a_virtual_environment_that_is_not_activated(tmp_path):
    """As validate.yml runs it from `.venv/bin/ansible-playbook` without `source .venv/bin/activate`: the
    ansible-inventory beside its Python is found."""
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "conftest.py").write_text(NODE_CONFTEST)
    (checks / "test_node.py").write_text("def test_reached(node):\n    assert node\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"dgx-01": None}}}))
    report = tmp_path / "validate.json"
    command = [sys.executable, "-m", "railforge.validate", "--inventory", str(inventory), "--checks", str(checks)]
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    result = subprocess.run([*command, "--json", str(report)], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(report.read_text())["dgx-01"]["passed"] == ["test_reached"]


def test_an_inventory_ansible_cannot_read_is_one_line(tmp_path, capsys):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: [\n")
    with pytest.raises(SystemExit) as exited:
        main(["--inventory", str(inventory)])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"railforge-validate: --inventory {inventory}: ") and error.count("\n") == 1, error
