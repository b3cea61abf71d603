#!/usr/bin/python
# Railforge - query-first firmware settings of a ConnectX device through mlxconfig.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: railforge_mlxconfig
short_description: Set ConnectX firmware parameters with mlxconfig, changing only what differs
description:
  - Queries the parameters with C(mlxconfig -d DEVICE q KEY ...), compares their next-boot values with
    O(settings) and sets only those that differ, in one C(mlxconfig -y set) call.
  - A change takes effect after a firmware reset (C(mlxfwreset)) or a reboot; the result says so.
version_added: "0.1.0"
author:
  - Railforge maintainers
options:
  device:
    description: PCI address (0000:3b:00.0) or MST device of the adapter.
    type: str
    required: true
  settings:
    description:
      - Parameter name to wanted value. Values are numbers (V(8)), booleans, or the names mlxconfig prints
        (V(ETH), V(IB), V(True)); names are compared case-insensitively with the name mlxconfig shows.
    type: dict
    required: true
  mlxconfig:
    description: The mlxconfig command.
    type: str
    default: mlxconfig
notes:
  - Supports check mode (queries, never sets).
"""

EXAMPLES = r"""
- name: Enable SR-IOV with 8 VFs on port 1 in Ethernet mode
  railforge_mlxconfig:
    device: "0000:3b:00.0"
    settings: {SRIOV_EN: true, NUM_OF_VFS: 8, LINK_TYPE_P1: ETH}
  register: fw
"""

RETURN = r"""
changes:
  description: Parameter name to before (as mlxconfig showed it) and after (as set).
  returned: always
  type: dict
reset_required:
  description: True when a firmware reset or reboot is needed for the new values to apply.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.railforge_hwparse import (  # noqa: E402
    ParseError,
    parse_mlxconfig_query,
    split_mlxconfig_value,
)


def wanted_matches(current_raw: str, wanted) -> bool:
    """Compare a value shown by mlxconfig ('True(1)', 'ETH(2)', '8') with a wanted bool, number or name."""
    label, code = split_mlxconfig_value(current_raw)
    if isinstance(wanted, bool):
        return code == int(wanted)
    if isinstance(wanted, int) or str(wanted).strip().lstrip("-").isdigit():
        return code == int(wanted)
    return label is not None and label.upper() == str(wanted).strip().upper()


def set_value(wanted) -> str:
    return str(int(wanted)) if isinstance(wanted, bool) else str(wanted)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "device": {"type": "str", "required": True},
            "settings": {"type": "dict", "required": True},
            "mlxconfig": {"type": "str", "default": "mlxconfig"},
        },
        supports_check_mode=True,
    )
    device, settings, tool = module.params["device"], module.params["settings"], module.params["mlxconfig"]
    rc, out, err = module.run_command([tool, "-d", device, "-e", "q", *settings])
    if rc != 0:
        module.fail_json(msg=f"mlxconfig query of {device} failed (rc {rc}): {(err or out).strip()}")
    try:
        current = parse_mlxconfig_query(out)[0]["config"]
    except ParseError as exc:
        module.fail_json(msg=f"cannot read mlxconfig output for {device}: {exc}")
    missing = sorted(set(settings) - set(current))
    if missing:
        module.fail_json(msg=f"{device} does not report {', '.join(missing)} (firmware does not support it?)")
    changes = {
        key: {"before": current[key], "after": set_value(wanted)}
        for key, wanted in settings.items()
        if not wanted_matches(current[key], wanted)
    }
    if changes and not module.check_mode:
        assignments = [f"{key}={change['after']}" for key, change in changes.items()]
        rc, out, err = module.run_command([tool, "-d", device, "-y", "set", *assignments])
        if rc != 0:
            detail = (err or out).strip()
            module.fail_json(msg=f"mlxconfig set on {device} failed (rc {rc}): {detail}", changes=changes)
    module.exit_json(changed=bool(changes), changes=changes, reset_required=bool(changes))


if __name__ == "__main__":
    main()
