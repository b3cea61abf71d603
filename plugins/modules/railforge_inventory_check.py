#!/usr/bin/python
"""Documentation of the railforge_inventory_check action (plugins/action), which does the work on the controller."""

DOCUMENTATION = r"""
module: railforge_inventory_check
short_description: Validate a Railforge inventory and report every problem at once
description:
  - Checks groups (required, nested, odd control plane, likely typos), and every variable of every host against
    the roles' meta/argument_specs.yml and Railforge's inventory variables (types, choices, list elements, nested
    options), the range, format and cross-variable rules of plugins/module_utils/railforge_inventory.py, unknown
    variables that look like typos or unprefixed role variables, host names and duplicate node addresses.
  - Runs on the controller and reads the inventory itself; secrets in values (URL passwords) are masked.
  - Changes nothing; fails listing all problems when there are any.
options:
  roles_dir:
    description: Directory holding the roles whose meta/argument_specs.yml declare their variables.
    type: path
    required: true
author: Railforge
"""

EXAMPLES = r"""
- name: Validate the inventory
  railforge_inventory_check:
    roles_dir: "{{ playbook_dir }}/../roles"
"""

RETURN = r"""
msg:
  description: On failure, the number of problems and one line per problem.
  type: str
  returned: failure
"""
