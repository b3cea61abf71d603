"""A malformed PodGroup CRD source stops role railforge_scheduler before it downloads or applies anything, naming
the variable (every problem at once)."""

import pytest

CASES = {
    "CRD over ftp": (
        {"railforge_scheduler_podgroup_crd_url": "ftp://mirror.example/scheduling.x-k8s.io_podgroups.yaml"},
        "railforge_scheduler_podgroup_crd_url: expected an http://, https:// or file:/// URL of the PodGroup CRD,"
        " got 'ftp://mirror.example/scheduling.x-k8s.io_podgroups.yaml'",
    ),
    "relative file URL": (
        {"railforge_scheduler_podgroup_crd_url": "file://crds/podgroups.yaml"},
        "railforge_scheduler_podgroup_crd_url: expected an http://, https:// or file:/// URL",
    ),
    "md5 checksum": (
        {"railforge_scheduler_podgroup_crd_checksum": "md5:0123456789abcdef0123456789abcdef"},
        "railforge_scheduler_podgroup_crd_checksum: expected sha256: and 64 lowercase hex digits, got 'md5:0123",
    ),
    "uppercase hex": (
        {"railforge_scheduler_podgroup_crd_checksum": "sha256:" + "E" * 64},
        "railforge_scheduler_podgroup_crd_checksum: expected sha256: and 64 lowercase hex digits",
    ),
    "both at once": (
        {"railforge_scheduler_podgroup_crd_url": "podgroups.yaml", "railforge_scheduler_podgroup_crd_checksum": ""},
        "railforge_scheduler_podgroup_crd_url: expected an http://, https:// or file:/// URL of the PodGroup CRD,"
        " got 'podgroups.yaml'; railforge_scheduler_podgroup_crd_checksum: expected sha256:",
    ),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_crd_source_fails_first(refused, variables, message):
    assert message in refused("railforge_scheduler", variables, "Download the PodGroup CRD")
