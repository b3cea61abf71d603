"""railforge.validate's reading of the node checks' JUnit XML: the node from the property tests/infra records, the
check's own parameters kept apart from it; the quarantine of failed nodes when no kubeconfig is there, and its note."""

import argparse

from railforge.k8s.annotations import QUARANTINE, Quarantine
from railforge.validate import parse_junit, quarantine_failing

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
