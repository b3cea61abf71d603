"""Kubernetes quantities as the core's integer units."""

import pytest

from railforge.k8s.quantity import parse_quantity, resource_amount, resource_map


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", 1.5, 1500),
        ("cpu", "0.1m", 1),  # rounded up, as the kubelet accounts it
        ("memory", "16Gi", 16 * 2**30),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("memory", "128974848", 128974848),
        ("nvidia.com/gpu", "8", 8),
        ("nvidia.com/gpu", 8, 8),
        ("rdma/rail0", "1k", 1000),
        ("ephemeral-storage", "1Ki", 1024),
    ],
)
def test_quantities_in_core_units(resource, text, amount):
    assert resource_amount(resource, text) == amount


@pytest.mark.parametrize("text", ["eight", "8 Gi", "1.2.3", "", "Gi", "1ki", True, None, [8]])
def test_malformed_quantities_are_named(text):
    with pytest.raises(ValueError, match="is not a quantity; expected"):
        parse_quantity(text)


def test_negative_amounts_are_refused():
    with pytest.raises(ValueError, match="'-1' is negative; expected an amount >= 0"):
        resource_amount("nvidia.com/gpu", "-1")


def test_a_mapping_names_the_field_and_resource_that_is_wrong():
    assert resource_map({"cpu": "250m", "nvidia.com/gpu": "4"}, "spec.minResources") == {
        "cpu": 250,
        "nvidia.com/gpu": 4,
    }
    with pytest.raises(ValueError, match=r"^spec.minResources\[memory\]: 'lots' is not a quantity"):
        resource_map({"cpu": "1", "memory": "lots"}, "spec.minResources")
    with pytest.raises(ValueError, match=r"spec\.minResources is 'x'; expected a mapping"):
        resource_map("x", "spec.minResources")
