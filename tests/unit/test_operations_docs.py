"""docs/operations stays true to the roles: the offline-mirror list names every URL, repository, signing-key and
registry variable of every role's defaults (the versions file's included), every variable the pages name exists,
and every page the index links exists."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs/operations"
MIRROR_VARIABLE = re.compile(r"_url$|_repo|_mirror|_registry|_image$|_fingerprint$|_key_file$")


def role_variables() -> dict[str, str]:
    """Every declared variable of every role, with the role it belongs to."""
    declared = {}
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        declared.update(dict.fromkeys(options, spec.parent.parent.name))
    return declared


def test_the_offline_mirror_page_lists_every_download_variable():
    listed = (DOCS / "offline-mirror.md").read_text()
    defaults = {}
    for path in ROOT.glob("roles/*/defaults/main.yml"):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    wanted = sorted(name for name in defaults if MIRROR_VARIABLE.search(name) and "_repo_manage" not in name)
    assert len(wanted) >= 15
    missing = [name for name in wanted if f"`{name}`" not in listed]
    assert not missing, f"not in docs/operations/offline-mirror.md: {missing}"


def test_every_variable_the_pages_name_exists():
    declared = role_variables()
    prefixes = tuple(sorted({f"{role}_" for role in declared.values()} | {"railforge_"}))
    inventory_spec = yaml.safe_load((ROOT / "playbooks/site.meta.yml").read_text())
    inventory_variables = inventory_spec["argument_specs"]["main"]["options"]
    for page in DOCS.glob("*.md"):
        for name in set(re.findall(r"`([a-z][a-z0-9_]+)`", page.read_text())):
            if name.startswith(prefixes) and not name.endswith("_"):
                assert name in declared or name in inventory_variables, f"{page.name}: {name} is no variable"


def test_the_index_links_every_page_and_every_link_resolves():
    index = (DOCS / "README.md").read_text()
    links = set(re.findall(r"\]\(([a-z-]+\.md)\)", index))
    assert links == {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+\.md)\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links {target}"
