"""``railforge`` command line: argparse subcommands.

Each feature area registers its subcommands through a ``register(subparsers)`` function listed in
``COMMANDS``; a subcommand sets ``func`` (args -> exit code) with ``set_defaults``.  Heavy imports
belong inside the handlers so ``railforge --help`` stays fast.  Arguments are checked by the types in
``railforge.cliargs``; bad input ends in one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from railforge import __version__
from railforge import lab as lab_commands
from railforge.bench import commands as bench_commands
from railforge.cliargs import Parser, UsageError
from railforge.k8s import commands as scheduler_commands
from railforge.k8s import quarantine, queuelist
from railforge.sim import commands as sim_commands
from railforge.testbed import commands as testbed_commands

COMMANDS = (
    sim_commands.register,
    testbed_commands.register,
    scheduler_commands.register,
    queuelist.register,
    quarantine.register,
    bench_commands.register,
    lab_commands.register,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="railforge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"railforge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # what a report quotes as the command that made it
    try:
        return int(args.func(args) or 0)
    except UsageError as error:
        print(f"{args.command_prog}: {' '.join(str(error).split())}", file=sys.stderr)  # one line
        return 2


if __name__ == "__main__":
    sys.exit(main())
