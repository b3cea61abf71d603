"""Action plugin: validate the whole inventory on the controller before anything changes.

An action, not a module: the inventory's variables (proxy passwords included) are read here from the task's
variables and never travel as module arguments, so they are neither logged nor shown with -vvv.
"""

import importlib.util
from pathlib import Path

import yaml
from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

# Shared with the unit tests and scripts/role_docs.py; ansible.module_utils.* is importable by modules only.
_SPEC = importlib.util.spec_from_file_location(
    "railforge_inventory", Path(__file__).resolve().parents[1] / "module_utils/railforge_inventory.py"
)
railforge_inventory = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(railforge_inventory)


def load_role_specs(roles_dir: Path) -> dict:
    specs = {}
    for path in sorted(roles_dir.glob("*/meta/argument_specs.yml")):
        entry = (yaml.safe_load(path.read_text()) or {}).get("argument_specs", {}).get("main", {})
        specs.update(entry.get("options", {}))
    return specs


def rendered_variables(host_variables, role_specs: dict) -> dict:
    """A host's variables, those whose value the check reads rendered (the others by name only, as None); one that
    needs facts or role defaults is left to its role."""
    variables = {}
    for name in host_variables:
        if not railforge_inventory.value_is_read(name, role_specs):
            variables[name] = None
            continue
        try:
            variables[name] = host_variables[name]
        except AnsibleError:
            continue
    return variables


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset({"roles_dir"})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        roles_dir = Path(self._task.args["roles_dir"])
        groups = {name: list(hosts) for name, hosts in task_vars["groups"].items()}
        result["changed"] = False
        if not groups["all"]:
            # Ansible only warns about a missing or unparsable -i and then runs on the implicit localhost alone.
            sources = ", ".join(task_vars.get("ansible_inventory_sources", [])) or "(none given)"
            result.update(
                failed=True,
                msg=f"The inventory {sources} has no hosts: it is missing, could not be parsed (see the warnings "
                "above) or is empty; nothing was changed",
            )
            return result
        specs = load_role_specs(roles_dir)
        hostvars = {host: rendered_variables(task_vars["hostvars"][host], specs) for host in groups["all"]}
        # what the stages that run on the machine running Ansible read: localhost's variables, group all's alone
        # (named without a value where one does not render there)
        localhost = task_vars["hostvars"]["localhost"]
        controller = dict.fromkeys(localhost) | rendered_variables(localhost, specs)
        problems = railforge_inventory.validate(groups, hostvars, specs, controller)
        if problems:
            result.update(
                failed=True,
                msg=f"The inventory has {len(problems)} problem(s); nothing was changed:\n- " + "\n- ".join(problems),
            )
        return result
