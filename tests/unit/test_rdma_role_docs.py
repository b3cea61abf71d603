"""The RDMA roles' defaults, argument specs and README variable tables agree."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ["doca_ofed", "gpudirect", "sriov_vfs", "roce_qos"]


def load(role: str, path: str):
    return yaml.safe_load((ROOT / "roles" / role / path).read_text())


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_declared_with_the_same_value(role):
    defaults = load(role, "defaults/main.yml")
    options = load(role, "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, value in defaults.items():
        assert name.startswith(role + "_"), name
        assert options[name].get("default") == value, name


@pytest.mark.parametrize("role", ROLES)
def test_readme_table_lists_every_option(role):
    readme = (ROOT / "roles" / role / "README.md").read_text()
    table = re.search(r"<!-- BEGIN VARIABLES -->(.*)<!-- END VARIABLES -->", readme, re.S).group(1)
    options = load(role, "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == list(options)


@pytest.mark.parametrize("role", ROLES)
def test_role_is_tagged_with_its_name(role):
    for task in load(role, "tasks/main.yml"):
        assert role in task.get("tags", []), task["name"]
