#!/usr/bin/python3
"""Stand-in for mft's mlxconfig (query and set), keeping firmware settings in a state file per device.

Understands `mlxconfig -d DEV [-e] [-y] q|query [KEY ...]` and `mlxconfig -d DEV [-y] set KEY=VALUE ...`,
prints queries in mlxconfig's layout (Next Boot column) and logs every set to /var/log/standin-mlxconfig.log,
so tests can see that only differing values were written. STANDIN_MLXCONFIG_DIR moves both (unit tests).
Test-only.
"""

import json
import os
import sys
from pathlib import Path

BASE = os.environ.get("STANDIN_MLXCONFIG_DIR")
STATE = Path(BASE or "/var/lib/standin-mlxconfig")
LOG = Path(BASE or "/var/log") / "standin-mlxconfig.log"
FACTORY = {"SRIOV_EN": 0, "NUM_OF_VFS": 0, "LINK_TYPE_P1": 1}
LABELS = {"SRIOV_EN": {0: "False", 1: "True"}, "LINK_TYPE_P1": {1: "IB", 2: "ETH", 3: "VPI"}}


def show(key: str, code: int) -> str:
    label = LABELS.get(key, {}).get(code)
    return f"{label}({code})" if label else str(code)


def parse(key: str, raw: str) -> int:
    names = {v.upper(): k for k, v in LABELS.get(key, {}).items()}
    return names[raw.upper()] if raw.upper() in names else int(raw, 0)


def main(argv: list[str]) -> int:
    args = [a for a in argv if a not in ("-y", "--yes", "-e", "--enable_verbosity")]
    if len(args) < 3 or args[0] != "-d":
        print("-E- stand-in mlxconfig: usage: mlxconfig -d DEV [-e] [-y] q|set ...", file=sys.stderr)
        return 3
    device, command, rest = args[1], args[2], args[3:]
    state_file = STATE / (device.replace("/", "_") + ".json")
    state = {**FACTORY, **(json.loads(state_file.read_text()) if state_file.exists() else {})}
    unknown = [key for key in rest if command in ("q", "query") and key not in state]
    if unknown:
        print(f"-E- The Device doesn't support {unknown[0]} parameter", file=sys.stderr)
        return 3
    if command in ("q", "query"):
        print(f"\nDevice #1:\n----------\n\nDevice type:        ConnectX7\nPCI device:         {device}\n")
        print("Configurations:                                          Next Boot")
        for key in rest or sorted(state):
            print(f"        {key:<40}{show(key, state[key])}")
        return 0
    if command == "set":
        for item in rest:
            key, _, raw = item.partition("=")
            state[key] = parse(key, raw)
            with LOG.open("a") as log:
                log.write(f"{device} {key}={raw}\n")
        STATE.mkdir(parents=True, exist_ok=True)
        state_file.write_text(json.dumps(state))
        print("Applying... Done!\n-I- Please reboot machine to load new configurations.")
        return 0
    print(f"-E- stand-in mlxconfig: unknown command {command}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
