"""Vars plugin: refuse an inventory whose group_vars or host_vars hold a file that is not YAML, naming the file, the
line and the column, before any play runs. Ansible's own loader reports such a file without saying which one.

Enabled first in ansible.cfg (``vars_plugins_enabled``), so it reads the files before ``host_group_vars`` loads
them. It only parses (``yaml.compose_all``): tags such as ``!vault`` and encrypted files are left to Ansible, and it
contributes no variables.
"""

from pathlib import Path

import yaml
from ansible.errors import AnsibleParserError
from ansible.plugins.vars import BaseVarsPlugin

DOCUMENTATION = """
    name: railforge_yaml_syntax
    short_description: Refuse group_vars and host_vars files that are not YAML, naming file, line and column
    description:
      - Parses every file under the inventory's group_vars and host_vars once per run and stops the run at the
        first that is not YAML, with its path, line and column. Adds no variables.
    options:
      stage:
        ini:
          - key: stage
            section: vars_railforge_yaml_syntax
        env:
          - name: ANSIBLE_VARS_PLUGIN_STAGE
"""

SUFFIXES = {"", ".yml", ".yaml", ".json"}  # what host_group_vars reads


def syntax_error(path: Path) -> str | None:
    """Why the file is not YAML (path:line:column: the parser's words) or cannot be read, or None."""
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"{path}: cannot be read: {error.strerror or error}"
    try:
        for _ in yaml.compose_all(text):
            pass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        words = "; ".join(part for part in (error.context, error.problem) if part)
        return f"{where}: not YAML: {words}"
    except yaml.YAMLError as error:
        return f"{path}: not YAML: {error}"
    return None


class VarsModule(BaseVarsPlugin):
    REQUIRES_ENABLED = True
    is_stateless = True  # one instance per run: it reads each folder once

    def __init__(self):
        super().__init__()
        self._checked: set[Path] = set()

    def get_vars(self, loader, path, entities, cache=True):
        super().get_vars(loader, path, entities)
        for kind in ("group_vars", "host_vars"):
            folder = Path(path, kind)
            if folder in self._checked or not folder.is_dir():
                continue
            self._checked.add(folder)
            for file in sorted(folder.rglob("*")):
                if file.is_file() and file.suffix in SUFFIXES and not file.name.startswith("."):
                    problem = syntax_error(file)
                    if problem:
                        raise AnsibleParserError(f"{problem}; fix it, nothing was changed")
        return {}
