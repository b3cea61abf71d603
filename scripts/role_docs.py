"""Generate each role's variable table (README.md) and docs/variables.md from meta/argument_specs.yml.

python scripts/role_docs.py          # rewrite the tables
python scripts/role_docs.py --check  # exit 1 when a table is out of date (run by the unit tests)
"""

import importlib.util
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BEGIN VARIABLES -->", "<!-- END VARIABLES -->"
INVENTORY_SPEC = ROOT / "plugins/module_utils/railforge_inventory.py"


def cell(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("...").strip()
    return text.replace("|", "\\|").replace("\n", " ")


def variable_table(options: dict) -> str:
    rows = ["| Variable | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for name, option in options.items():
        kind = option.get("type", "str")
        if option.get("elements"):
            kind += f" of {option['elements']}"
        description = (
            " ".join(option.get("description", []))
            if isinstance(option.get("description"), list)
            else (option.get("description", ""))
        )
        if option.get("choices"):
            description += " One of: " + ", ".join(f"`{c}`" for c in option["choices"]) + "."
        if option.get("required_for"):
            description += f" Required for hosts in `{option['required_for']}`."
        if option.get("required"):
            default = "(required)"
        elif "default" in option:
            default = f"`{cell(option['default'])}`"
        else:
            default = "(unset)"
        rows.append(f"| `{name}` | {kind} | {default} | {description.strip()} |")
    return "\n".join(rows) + "\n"


def render_readme(readme: Path, table: str) -> str:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: add {BEGIN} and {END} where the variable table goes")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def role_options(role: Path) -> dict:
    spec = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    return spec.get("options", {})


def inventory_section() -> str:
    loader = importlib.util.spec_from_file_location("railforge_inventory", INVENTORY_SPEC)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return (
        "\n## Inventory (railforge_*)\n\n"
        "Cluster-wide variables the roles and the validation read, set in the inventory. Declared in "
        f"`{INVENTORY_SPEC.relative_to(ROOT)}` (`INVENTORY_VARIABLES`; ranges and formats in `RULES`, rules between "
        "variables in `CROSS_RULES`), where `playbooks/inventory_check.yml` checks them with every role variable "
        "before anything changes.\n\n" + variable_table(module.INVENTORY_VARIABLES)
    )


def main(check: bool) -> int:
    stale = []
    sections = ["# Role variables\n\nGenerated from each role's meta/argument_specs.yml by scripts/role_docs.py.\n"]
    for role in sorted(p.parent.parent for p in ROOT.glob("roles/*/meta/argument_specs.yml")):
        table = variable_table(role_options(role))
        sections.append(f"\n## {role.name}\n\n{table}")
        readme = role / "README.md"
        wanted = render_readme(readme, table)
        if readme.read_text() != wanted:
            stale.append(readme)
            if not check:
                readme.write_text(wanted)
    sections.append(inventory_section())
    reference = ROOT / "docs/variables.md"
    wanted = "".join(sections)
    if not reference.exists() or reference.read_text() != wanted:
        stale.append(reference)
        if not check:
            reference.write_text(wanted)
    if check and stale:
        print("out of date (run: python scripts/role_docs.py): " + ", ".join(str(p.relative_to(ROOT)) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
