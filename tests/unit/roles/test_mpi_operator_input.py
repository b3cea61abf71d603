"""Malformed input to role mpi_operator fails before it downloads or applies anything, naming the variable."""

import pytest

CASES = {
    "scheduler name with a space": (
        {"mpi_operator_gang_scheduler": "rail forge"},
        "- mpi_operator_gang_scheduler must be a scheduler name (a DNS subdomain) or '' for no gang scheduling,"
        " got 'rail forge'",
    ),
    "CRD over ftp": (
        {"mpi_operator_crd_url": "ftp://mirror.example/kubeflow.org_mpijobs.yaml"},
        "- mpi_operator_crd_url must be an http://, https:// or file:/// URL of a file,"
        " got 'ftp://mirror.example/kubeflow.org_mpijobs.yaml'",
    ),
    "relative file URL": (
        {"mpi_operator_crd_url": "file://crds/mpijobs.yaml"},
        "- mpi_operator_crd_url must be an http://, https:// or file:/// URL of a file, got 'file://crds/mpijobs.yaml'",
    ),
    "md5 checksum": (
        {"mpi_operator_crd_checksum": "md5:0123456789abcdef0123456789abcdef"},
        "- mpi_operator_crd_checksum must be sha256: and 64 lowercase hex digits, got 'md5:0123",
    ),
    "resources without limits": (
        {"mpi_operator_resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        "- mpi_operator_resources must be {requests: {cpu, memory}, limits: {cpu, memory}}, got {'requests'",
    ),
    "limits without memory": (
        {"mpi_operator_resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
        "- mpi_operator_resources must be {requests: {cpu, memory}, limits: {cpu, memory}},"
        " got {'requests': {'cpu': '1',",
    ),
    "unknown pull policy": ({"mpi_operator_image_pull_policy": "Sometimes"}, "mpi_operator_image_pull_policy"),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_input_fails_first(refused, variables, message):
    output = refused("mpi_operator", variables, "Download the MPIJob CRD")
    assert message in output
    if message.startswith("- "):  # a line of the one message of railforge_role_input
        assert "Invalid input for role mpi_operator (nothing was changed):\n" in output


def test_all_value_problems_reported_at_once(refused):
    bad = {"mpi_operator_gang_scheduler": "rail forge", "mpi_operator_crd_checksum": "sha256:00"}
    output = refused("mpi_operator", bad, "Download the MPIJob CRD")
    assert (
        "Invalid input for role mpi_operator (nothing was changed):\n- mpi_operator_crd_checksum must be sha256:"
        in output
    )
    assert "\n- mpi_operator_gang_scheduler must be a scheduler name" in output
