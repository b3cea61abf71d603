#!/usr/bin/python
"""Ansible module: validate a Railforge inventory before anything changes."""

DOCUMENTATION = r"""
module: railforge_inventory_check
short_description: Validate a Railforge inventory and report every problem at once
description:
  - Checks groups (required, nested, odd control plane, likely typos), required variables per group, types and
    choices of every variable declared by a role's meta/argument_specs.yml or by Railforge's inventory schema,
    unknown variables that look like typos, host names and duplicate node addresses.
  - Changes nothing; fails listing all problems when there are any.
options:
  groups:
    description: The inventory's groups (pass C(groups)).
    type: dict
    required: true
  hostvars:
    description: Each host's variables, by host name.
    type: dict
    required: true
  roles_dir:
    description: Directory holding the roles whose meta/argument_specs.yml declare their variables.
    type: path
    required: true
author: Railforge
"""

EXAMPLES = r"""
- name: Validate the inventory
  railforge_inventory_check:
    groups: "{{ groups }}"
    hostvars: "{{ dict(groups['all'] | zip(groups['all'] | map('extract', hostvars))) }}"
    roles_dir: "{{ playbook_dir }}/../roles"
"""

RETURN = r"""
problems:
  description: One line per problem, empty when the inventory is sound.
  type: list
  elements: str
  returned: always
"""

from pathlib import Path  # noqa: E402  (Ansible modules document themselves before their imports)

import yaml  # noqa: E402
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.railforge_inventory import validate  # noqa: E402


def load_role_specs(roles_dir: Path) -> dict:
    specs = {}
    for path in sorted(roles_dir.glob("*/meta/argument_specs.yml")):
        entry = (yaml.safe_load(path.read_text()) or {}).get("argument_specs", {}).get("main", {})
        specs.update(entry.get("options", {}))
    return specs


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "groups": {"type": "dict", "required": True},
            "hostvars": {"type": "dict", "required": True},
            "roles_dir": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    problems = validate(
        module.params["groups"], module.params["hostvars"], load_role_specs(Path(module.params["roles_dir"]))
    )
    if problems:
        module.fail_json(
            msg=f"The inventory has {len(problems)} problem(s); nothing was changed:\n- "
            + "\n- ".join(problems),
            problems=problems,
        )
    module.exit_json(changed=False, problems=[])


if __name__ == "__main__":
    main()
