"""The arrows of docs/architecture.md: which of the scheduler's modules may import which."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
K8S_LEAVES = {"rest", "quantity", "settings", "views", "annotations", "gangapis"}
# module (or package) -> the railforge modules (or packages) it may import
ALLOWED = {
    "railforge.scheduler": {"railforge.scheduler"},
    "railforge.sim": {"railforge.scheduler", "railforge.sim", "railforge.cliargs"},
    "railforge.k8s.annotations": {"railforge.k8s.settings"},
    "railforge.k8s.gangapis": {"railforge.k8s.rest", "railforge.k8s.settings"},
    "railforge.k8s.dra": {"railforge.k8s.rest"},
    "railforge.k8s.translate": {
        "railforge.scheduler",
        *(f"railforge.k8s.{m}" for m in ("annotations", "dra", "gangapis", "podaffinity", "quantity", "settings")),
    },
    "railforge.k8s.podaffinity": {"railforge.scheduler"},
    "railforge.k8s.writes": {
        "railforge.scheduler",
        *(
            f"railforge.k8s.{m}"
            for m in (
                "annotations",
                "dra",
                "rest",
                "events",
                "evidence",
                "metrics",
                "podaffinity",
                "translate",
                "views",
            )
        ),
    },
    "railforge.k8s.evidence": {"railforge.k8s.rest"},
    "railforge.k8s.reporting": {
        "railforge.scheduler",
        *(f"railforge.k8s.{m}" for m in ("annotations", "events", "gangapis", "metrics", "translate", "views")),
    },
    "railforge.k8s.events": {"railforge.k8s.gangapis", "railforge.k8s.rest"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The railforge modules ``path`` imports, at any depth (deferred and type-only imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("railforge.")}


def within(name: str, allowed: set[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)


def rule_of(module: str) -> set[str] | None:
    matches = [key for key in ALLOWED if module == key or module.startswith(key + ".")]
    return ALLOWED[max(matches, key=len)] if matches else None


# the rooms with a rule; hosts, commands and tools (the loop, the CLI, the test bed) may import the rooms
RULED = sorted(path for path in SRC.glob("railforge/**/*.py") if rule_of(module_name(path)) is not None)


@pytest.mark.parametrize("path", RULED, ids=module_name)
def test_a_module_imports_only_what_its_room_may(path):
    module = module_name(path)
    allowed = rule_of(module) or set()
    wrong = {name for name in imports(path) if not within(name, allowed)}
    assert not wrong, f"{module} imports {sorted(wrong)}; its room may import {sorted(allowed)}"


def test_no_k8s_leaf_imports_the_loop_the_write_side_or_reporting():
    for leaf in K8S_LEAVES:
        names = imports(SRC / "railforge/k8s" / f"{leaf}.py")
        assert not {n for n in names if within(n, {"railforge.k8s.adapter", "railforge.k8s.writes"})}, leaf
        assert not {n for n in names if within(n, {"railforge.k8s.reporting", "railforge.k8s.events"})}, leaf


def test_the_rules_catch_a_forbidden_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("from railforge.k8s.writes import WriteSide\n")
    assert not within(next(iter(imports(module))), ALLOWED["railforge.k8s.reporting"])
