"""Every module's DOCUMENTATION, EXAMPLES and RETURN is YAML that ansible-doc can read: ansible-lint only logs
an unreadable block (as an [ERROR] line) and passes."""

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).parents[2] / "plugins" / "modules").glob("*.py"))


@pytest.mark.parametrize("module", MODULES, ids=[m.stem for m in MODULES])
def test_the_module_documents_itself_in_yaml(module):
    blocks = {
        node.targets[0].id: node.value.value
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
    }
    assert set(blocks) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    documentation = yaml.safe_load(blocks["DOCUMENTATION"])
    assert documentation["module"] == module.stem and documentation["options"]
    yaml.safe_load(blocks["EXAMPLES"])
    yaml.safe_load(blocks["RETURN"])
