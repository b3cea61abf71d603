"""railforge.validate's reading of the node checks' JUnit XML: the node from the property tests/infra records, the
check's own parameters kept apart from it."""

from railforge.validate import parse_junit

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
