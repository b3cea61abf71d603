"""check_role (plugins/module_utils/railforge_inventory.py), which the railforge_role_input action runs as each
role's first task: the pre-flight's own rules applied to one role's variables, every problem in one message."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checks():
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems(checks, role: str, values: dict) -> list[str]:
    return checks.check_role(role, values, checks.role_specs(ROOT / "roles" / role))


def test_every_role_with_options_has_its_specs(checks):
    for role in sorted(path.name for path in (ROOT / "roles").iterdir() if (path / "meta/argument_specs.yml").exists()):
        assert checks.role_specs(ROOT / "roles" / role), role


def test_a_sound_value_passes_and_a_bad_one_is_named_with_what_was_expected(checks):
    assert problems(checks, "nvidia_driver", {"nvidia_driver_branch": "580"}) == []
    assert problems(checks, "nvidia_driver", {"nvidia_driver_branch": "58"}) == [
        "nvidia_driver_branch must be a driver branch of three digits like \"580\", got '58' (str)"
    ]


def test_every_problem_at_once_and_the_cross_rules_between_the_role_own_variables(checks):
    found = problems(
        checks,
        "nvidia_driver",
        {"nvidia_driver_branch": "580", "nvidia_driver_version": "570.1", "nvidia_driver_reboot_timeout": 0},
    )
    assert len(found) == 2
    assert found[0].startswith("nvidia_driver_reboot_timeout must be between 1 and 86400")
    assert found[1].startswith("nvidia_driver_version must be a version of nvidia_driver_branch 580")


def test_a_cross_rule_with_a_variable_of_another_role_is_left_to_the_preflight(checks):
    # nvidia_dcgm_cuda_major against nvidia_driver_branch: nvidia_dcgm alone does not hold the branch
    assert problems(checks, "nvidia_dcgm", {"nvidia_dcgm_cuda_major": 13, "nvidia_driver_branch": "550"}) == []


def test_secrets_are_masked(checks):
    found = problems(checks, "common", {"common_https_proxy": "http://ops:S3cr3t@proxy example.com:3128"})
    assert found and "S3cr3t" not in found[0] and "http://ops:********@proxy example.com:3128" in found[0]


def test_the_message_lists_every_problem_on_its_own_line(checks):
    message = checks.role_input_message("roce_qos", ["a: x", "b: y"])
    assert message == "Invalid input for role roce_qos (nothing was changed):\n- a: x\n- b: y"


@pytest.mark.parametrize(
    ("value", "problem"),
    [("ubuntu2404", False), ("debian12", False), ("ubuntu2204", False), ("ubuntu1804", True), ("rhel9", True)],
)
def test_the_driver_repository_distribution_is_one_the_role_supports(checks, value, problem):
    assert bool(checks.FORMATS["cuda_repo_distribution"](value)) is problem
