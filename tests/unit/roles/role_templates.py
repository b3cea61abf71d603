"""Render a role's manifest template as Ansible would, with the versions pins and the role's own defaults and vars."""

from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[3]
filter_loader.add_directory(str(ROOT / "plugins/filter"))


def trusted(value):
    """The YAML's strings made templates, as Ansible treats a role's defaults and vars."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def render(role: str, template: str, **overrides) -> list[dict]:
    """The template's objects, with the versions pins, the role's defaults and vars, and ``overrides``."""
    filter_loader.add_directory(str(ROOT / f"roles/{role}/filter_plugins"))
    variables = {}
    for path in ("roles/versions/defaults/main.yml", f"roles/{role}/defaults/main.yml", f"roles/{role}/vars/main.yml"):
        if (ROOT / path).exists():  # not every role has vars
            variables.update(trusted(yaml.safe_load((ROOT / path).read_text())))
    variables.update({"groups": {}, "hostvars": {}, **overrides})
    text = Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template((ROOT / f"roles/{role}/templates/{template}").read_text())
    )
    return [obj for obj in yaml.safe_load_all(text) if obj is not None]


def one(objects: list[dict], kind: str) -> dict:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found
