"""Make ``ansible.module_utils.railforge_*`` importable from plugins/module_utils in unit tests."""

from __future__ import annotations

import sys
from pathlib import Path

import ansible.module_utils
import pytest

ROOT = Path(__file__).resolve().parents[3]
_MU = str(ROOT / "plugins/module_utils")
if _MU not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MU)
# plain imports too (tests/unit/hw/shapes.py and the filter plugin's tests)
for p in (_MU, str(ROOT / "plugins/filter"), str(Path(__file__).parent)):
    if p not in sys.path:
        sys.path.insert(0, p)


@pytest.fixture(scope="session")
def shape_trees(tmp_path_factory):
    """Every machine shape of shapes.py built once per session: name -> root path (str)."""
    from shapes import SHAPES

    from railforge.hwsim import build

    return {n: str(build(tmp_path_factory.mktemp(n), fn())) for n, fn in SHAPES.items()}
