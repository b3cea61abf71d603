"""The project's Ansible plugin code (plugins/) for Python outside Ansible, loaded by path: the plugins are not a
package, and only Ansible's loaders find them by name, inside a run."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


@functools.cache
def load(relative: str) -> ModuleType:
    """plugins/<relative> (e.g. "filter/railforge_hw.py") as a module, loaded once per process."""
    path = PLUGINS / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
