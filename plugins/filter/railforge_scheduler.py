# Railforge - the scheduler's settings, checked on the machine running Ansible before anything is applied.
"""Jinja2 filter railforge_scheduler_settings: the settings mapping, unchanged, once the scheduler's own validation
(railforge.k8s.settings) accepts it; otherwise the task fails with that validation's one-line message."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.errors import AnsibleFilterError

CHECKOUT_SOURCES = Path(__file__).resolve().parents[2] / "src"


def _settings_module():
    try:
        from railforge.k8s import settings
    except ImportError:  # run from a checkout without the package installed: use its sources
        sys.path.insert(0, str(CHECKOUT_SOURCES))
        from railforge.k8s import settings
    return settings


def railforge_scheduler_settings(raw: object, variable: str = "railforge_scheduler_settings") -> object:
    settings = _settings_module()
    try:
        settings.settings_from_mapping(raw)
    except settings.SettingsError as error:
        raise AnsibleFilterError(f"{variable}: {error}") from None
    return raw


class FilterModule:
    def filters(self):
        return {"railforge_scheduler_settings": railforge_scheduler_settings}
