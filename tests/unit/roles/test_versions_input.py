"""A malformed pin stops role versions before anything else runs, naming the pin (every problem at once), with the
pre-flight's own rules (plugins/module_utils/railforge_inventory.py)."""

import pytest

CASES = {
    "leading v": (
        {"versions_kubernetes": "v1.36.5"},
        "- versions_kubernetes must be MAJOR.MINOR.PATCH without a leading v, got 'v1.36.5' (str)",
    ),
    "scheduler tag of two parts": (
        {"versions_railforge_scheduler_tag": "0.4"},
        "- versions_railforge_scheduler_tag must be MAJOR.MINOR.PATCH without a leading v, got '0.4' (str)",
    ),
    "pause image without a tag": (
        {"versions_pause_image": "registry.k8s.io/pause"},
        "- versions_pause_image must be an image REGISTRY/NAME:TAG, got 'registry.k8s.io/pause' (str)",
    ),
    "Go toolchain without go": (
        {"versions_go_toolchain": "1.26.8"},
        "- versions_go_toolchain must be a Go toolchain name like go1.26.8, got '1.26.8' (str)",
    ),
    "registry with a scheme": (
        {"versions_railforge_scheduler_registry": "https://ghcr.io/railforge"},
        "- versions_railforge_scheduler_registry must be a registry HOST[:PORT][/PATH] without a scheme",
    ),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_pin_fails_first(run_role, variables, message):
    result = run_role("versions", variables)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Invalid input for role versions (nothing was changed):\n" in output
    assert message in output
    assert "changed=0" in output


def test_every_pin_problem_at_once(run_role):
    result = run_role("versions", {"versions_etcd": "3.6", "versions_go_toolchain": "go"})
    output = result.stdout + result.stderr
    assert "\n- versions_etcd must be MAJOR.MINOR.PATCH" in output
    assert "\n- versions_go_toolchain must be a Go toolchain name" in output


def test_the_shipped_pins_pass(run_role):
    result = run_role("versions", {})
    assert result.returncode == 0, result.stdout + result.stderr
