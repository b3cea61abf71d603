"""A malformed PodGroup CRD source stops role railforge_scheduler before it downloads or applies anything, naming
the variable (every problem at once)."""

import pytest

CASES = {
    "CRD over ftp": (
        {"railforge_scheduler_podgroup_crd_url": "ftp://mirror.example/scheduling.x-k8s.io_podgroups.yaml"},
        "- railforge_scheduler_podgroup_crd_url must be an http://, https:// or file:/// URL of a file,"
        " got 'ftp://mirror.example/scheduling.x-k8s.io_podgroups.yaml'",
    ),
    "relative file URL": (
        {"railforge_scheduler_podgroup_crd_url": "file://crds/podgroups.yaml"},
        "- railforge_scheduler_podgroup_crd_url must be an http://, https:// or file:/// URL of a file,"
        " got 'file://crds/podgroups.yaml'",
    ),
    "md5 checksum": (
        {"railforge_scheduler_podgroup_crd_checksum": "md5:0123456789abcdef0123456789abcdef"},
        "- railforge_scheduler_podgroup_crd_checksum must be sha256: and 64 lowercase hex digits, got 'md5:0123",
    ),
    "uppercase hex": (
        {"railforge_scheduler_podgroup_crd_checksum": "sha256:" + "E" * 64},
        "- railforge_scheduler_podgroup_crd_checksum must be sha256: and 64 lowercase hex digits, got 'sha256:EEE",
    ),
    "both at once": (
        {"railforge_scheduler_podgroup_crd_url": "podgroups.yaml", "railforge_scheduler_podgroup_crd_checksum": ""},
        "- railforge_scheduler_podgroup_crd_checksum must be sha256: and 64 lowercase hex digits, got '' (str)\n"
        "- railforge_scheduler_podgroup_crd_url must be an http://, https:// or file:/// URL of a file,"
        " got 'podgroups.yaml'",
    ),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_crd_source_fails_first(refused, variables, message):
    output = refused("railforge_scheduler", variables, "Download the PodGroup CRD")
    assert "Invalid input for role railforge_scheduler (nothing was changed):\n" in output
    assert message in output
