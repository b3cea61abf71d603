"""Action plugin: check one role's input on the controller, with the pre-flight's own rules, before it changes anything.

The values are the play's (role defaults, inventory, extra vars), read here from the task's variables: none travels
as a module argument, so none is logged or shown with -vvv, and URL passwords are masked in the message. The rules
are plugins/module_utils/railforge_inventory.py's (argument specs, RULES and the CROSS_RULES between the role's own
variables): their one home, shared with the pre-flight. Checks that need facts or the hosts stay in the roles.
"""

import importlib.util
from pathlib import Path

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

# Shared with the unit tests and scripts/role_docs.py; ansible.module_utils.* is importable by modules only.
_SPEC = importlib.util.spec_from_file_location(
    "railforge_inventory", Path(__file__).resolve().parents[1] / "module_utils/railforge_inventory.py"
)
railforge_inventory = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(railforge_inventory)

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset({"role"})
    _supports_check_mode = True

    def _role_dir(self, role: str) -> Path:
        own = getattr(self._task, "_role", None)
        if own is not None and own.get_name() == role:
            return Path(own._role_path)
        return ROLES_DIR / role

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        role = self._task.args.get("role")
        result["changed"] = False
        if not isinstance(role, str) or not role:
            result.update(failed=True, msg="railforge_role_input needs role: the name of the role to check")
            return result
        specs = railforge_inventory.role_specs(self._role_dir(role))
        if not specs:
            result.update(failed=True, msg=f"role {role} has no options in meta/argument_specs.yml (main)")
            return result
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        variables = {}
        for name in specs:
            if name not in task_vars:
                continue
            try:
                variables[name] = templar.template(task_vars[name])
            except AnsibleError:
                continue  # needs facts or another role's values: left to the role's own checks
        groups = {name: list(hosts) for name, hosts in task_vars.get("groups", {}).items()}
        problems = railforge_inventory.check_role(role, variables, specs, groups)
        if problems:
            result.update(failed=True, msg=railforge_inventory.role_input_message(role, problems))
        return result
