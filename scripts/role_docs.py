"""Render every role's README.md and docs/variables.md, each from one template (scripts/templates/).

A role's README is its hand-written roles/<role>/README.prose.md (what the role does first, then the sections
"Without the hardware", "Example" and "Tests", and any others the role needs) around the variable table rendered
from its meta/argument_specs.yml. docs/variables.md lists the inventory's railforge_* variables
(playbooks/site.meta.yml) and every role's, each role linked to its README.

python scripts/role_docs.py          # make docs: rewrite what is out of date
python scripts/role_docs.py --check  # name what is out of date and exit 1 (the unit tests run it)
"""

import functools
import importlib.util
import re
import sys
from pathlib import Path

import jinja2
import yaml

ROOT = Path(__file__).resolve().parent.parent
REQUIRED_SECTIONS = ("Without the hardware", "Example", "Tests")
INVENTORY_SPEC = "playbooks/site.meta.yml"


@functools.cache
def checker():
    """The pre-flight's checker (plugins/module_utils/railforge_inventory.py): the home of the rules documented."""
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    return checks


def cluster_rules() -> list[str]:
    """The pre-flight's rules over the whole inventory, one line each, from their docstrings in the checker."""
    return [" ".join(rule.__doc__.split()) for rule in checker().CLUSTER_RULES]


class ProseError(Exception):
    """A README.prose.md that the template cannot use."""


def main_entry(spec_file: Path) -> dict:
    with spec_file.open() as stream:  # a YAML error then names the file
        return yaml.safe_load(stream)["argument_specs"]["main"]


def cell(value) -> str:
    """A value as one Markdown table cell: YAML flow style, pipes escaped."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
    return text.replace("|", "\\|").replace("\n", " ")


def text_of(description) -> str:
    """A description (a string or a list of them) as one table cell."""
    text = " ".join(description) if isinstance(description, list) else (description or "")
    return " ".join(text.split()).replace("|", "\\|").replace("<", "\\<")  # no table break, no HTML tag


def rows(options: dict, parent: str = ""):
    """One row per variable, then one per option of its items (`name[].option`) or of itself (`name.option`)."""
    for name, option in options.items():
        full = f"{parent}{name}"
        kind = option.get("type", "str") + (f" of {option['elements']}" if option.get("elements") else "")
        if option.get("required"):
            default = "(required)"
        elif option.get("required_for"):
            default = f"(required for {option['required_for']})"
        elif "default" in option:
            default = f"`{cell(option['default'])}`"
        else:
            default = "(unset)"
        choices = ", ".join(f"`{cell(choice)}`" for choice in option.get("choices", []))
        rule = text_of(checker().rule_text(full))
        yield f"| `{full}` | {kind} | {default} | {choices} | {rule} | {text_of(option.get('description'))} |"
        if option.get("options"):
            yield from rows(option["options"], full + ("[]." if option.get("type") == "list" else "."))


def variable_table(options: dict) -> str:
    head = ["| Variable | Type | Default | Choices | Rule | Description |", "| --- | --- | --- | --- | --- | --- |"]
    return "\n".join(head + list(rows(options))) + "\n"


def shown(prose: Path) -> str:
    """The prose file's path from the repository root: roles/<role>/README.prose.md."""
    return str(prose.relative_to(prose.parents[2]))


def read_prose(path: Path) -> dict:
    """The hand-written part: the summary before the first `## ` heading, then the sections by title."""
    if not path.exists():
        raise ProseError(
            f"{shown(path)} is missing: write what the role does, then ## {', ## '.join(REQUIRED_SECTIONS)}"
        )
    summary, *parts = re.split(r"^## ", path.read_text(), flags=re.MULTILINE)
    sections = {}
    for part in parts:
        title, _, body = part.partition("\n")
        sections[title.strip()] = body.strip()
    missing = [title for title in REQUIRED_SECTIONS if title not in sections]
    if missing or not summary.strip():
        wanted = ["a summary before the first heading"] * (not summary.strip()) + [f"## {t}" for t in missing]
        raise ProseError(f"{shown(path)}: add {', '.join(wanted)}")
    return {
        "summary": summary.strip(),
        "without_the_hardware": sections["Without the hardware"],
        "example": sections["Example"],
        "tests": sections["Tests"],
        "other_sections": [(t, body) for t, body in sections.items() if t not in REQUIRED_SECTIONS],
    }


def wanted_files(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file under `root` with the text it should have."""
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        keep_trailing_newline=True,
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    files, roles = {}, []
    for spec_file in sorted(root.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent
        entry = main_entry(spec_file)
        table = variable_table(entry.get("options", {}))
        short_description = entry["short_description"].rstrip(".")
        files[role / "README.md"] = templates.get_template("role_readme.md.j2").render(
            role=role.name, short_description=short_description, table=table, prose=read_prose(role / "README.prose.md")
        )
        roles.append({"name": role.name, "short_description": short_description, "table": table})
    inventory = main_entry(root / INVENTORY_SPEC)
    files[root / "docs/variables.md"] = templates.get_template("variables.md.j2").render(
        inventory_table=variable_table(inventory["options"]), cluster_rules=cluster_rules(), roles=roles
    )
    return files


def stale_files(root: Path = ROOT) -> dict[Path, str]:
    return {path: text for path, text in wanted_files(root).items() if not path.exists() or path.read_text() != text}


def main(argv: list[str], root: Path = ROOT) -> int:
    try:
        stale = stale_files(root)
    except ProseError as error:
        print(error)
        return 1
    if "--check" in argv:
        if stale:
            names = ", ".join(str(path.relative_to(root)) for path in stale)
            print(f"out of date with the argument specs or README.prose.md: {names}; run `make docs`")
        return 1 if stale else 0
    for path, text in stale.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
