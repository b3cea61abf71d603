"""Malformed input to role mpi_operator fails before it downloads or applies anything, naming the variable."""

import pytest

CASES = {
    "scheduler name with a space": (
        {"mpi_operator_gang_scheduler": "rail forge"},
        "mpi_operator_gang_scheduler: expected a scheduler name (a DNS subdomain) or '' for no gang scheduling,"
        " got 'rail forge'",
    ),
    "CRD over ftp": (
        {"mpi_operator_crd_url": "ftp://mirror.example/kubeflow.org_mpijobs.yaml"},
        "mpi_operator_crd_url: expected an http://, https:// or file:/// URL of the MPIJob CRD,"
        " got 'ftp://mirror.example/kubeflow.org_mpijobs.yaml'",
    ),
    "relative file URL": (
        {"mpi_operator_crd_url": "file://crds/mpijobs.yaml"},
        "mpi_operator_crd_url: expected an http://, https:// or file:/// URL",
    ),
    "md5 checksum": (
        {"mpi_operator_crd_checksum": "md5:0123456789abcdef0123456789abcdef"},
        "mpi_operator_crd_checksum: expected sha256: and 64 lowercase hex digits, got 'md5:0123",
    ),
    "resources without limits": (
        {"mpi_operator_resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        'mpi_operator_resources: expected {requests: {cpu, memory}, limits: {cpu, memory}}, got {"requests"',
    ),
    "limits without memory": (
        {"mpi_operator_resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
        "mpi_operator_resources: expected {requests: {cpu, memory}, limits: {cpu, memory}}",
    ),
    "unknown pull policy": ({"mpi_operator_image_pull_policy": "Sometimes"}, "mpi_operator_image_pull_policy"),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_input_fails_first(refused, variables, message):
    assert message in refused("mpi_operator", variables, "Download the MPIJob CRD")


def test_all_value_problems_reported_at_once(refused):
    bad = {"mpi_operator_gang_scheduler": "rail forge", "mpi_operator_crd_checksum": "sha256:00"}
    output = refused("mpi_operator", bad, "Download the MPIJob CRD")
    assert "mpi_operator_gang_scheduler: expected a scheduler name" in output
    assert "mpi_operator_crd_checksum: expected sha256:" in output
