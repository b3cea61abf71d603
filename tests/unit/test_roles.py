"""Every role keeps the house rules: prefixed defaults declared in argument_specs."""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent for p in ROOT.glob("roles/*/meta/argument_specs.yml"))


def options(role: Path) -> dict:
    return yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]


def test_every_role_has_argument_specs():
    assert {p.name for p in ROLES} == {p.name for p in (ROOT / "roles").iterdir() if p.is_dir()}


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_defaults_are_prefixed_and_declared_with_the_same_default(role):
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    declared = options(role)
    assert set(defaults) == set(declared)
    for name, value in defaults.items():
        assert name.startswith(role.name + "_"), name
        assert declared[name].get("default") == value, name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_option_is_described_and_typed(role):
    for name, option in options(role).items():
        assert option.get("description"), name
        assert option.get("type"), name


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_every_entry_task_is_tagged_with_the_role_name(role):
    for task in yaml.safe_load((role / "tasks/main.yml").read_text()):
        assert role.name in task.get("tags", []), task.get("name")
