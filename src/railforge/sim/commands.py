"""``railforge simulate`` and ``railforge simulate-report`` subcommands."""

from __future__ import annotations

import argparse
import functools
import os
import shlex

from railforge.cliargs import (
    UsageError,
    non_negative_float,
    non_negative_int,
    output_directory,
    output_file,
    positive_float,
    positive_int,
    text_file,
)

DEFAULT_NOTES = "docs/simulation-notes.md"
ALL_TRACES = ("philly", "itp:cluster01", "itp:cluster02", "itp:cluster03", "itp:cluster04", "itp:cluster05")
DEFAULT_POLICIES = "railforge,strict_fifo,best_effort_fifo,sjf_oracle"


def _csv(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated names, got {value!r}")
    return names


def _fits_type(value: object, hint: object) -> bool:
    """Whether a parsed ``--set`` value fits a SchedulerConfig field's annotation."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits_type(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint in (bool, str):
        return isinstance(value, hint)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return False


def config_override(text: str) -> tuple[str, object]:
    """``FIELD=VALUE`` for ``--set``: a SchedulerConfig field and its value as JSON (``86400``,
    ``null``, ``true``); a value that is not JSON is taken as a string (``order=sjf_oracle``)."""
    import json
    import typing

    from railforge.scheduler.model import SchedulerConfig

    hints = {
        name: hint
        for name, hint in typing.get_type_hints(SchedulerConfig).items()
        if typing.get_origin(hint) is not tuple  # topology keys and levels: not from the command line
    }
    name, sep, raw = text.partition("=")
    if not sep or name not in hints:
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE with FIELD one of: {', '.join(sorted(hints))}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    hint = hints[name]
    if not _fits_type(value, hint):
        if typing.get_origin(hint) is typing.Literal:
            expected = "one of " + ", ".join(map(str, typing.get_args(hint)))
        elif hint is bool:
            expected = "true or false"
        else:
            expected = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
        raise argparse.ArgumentTypeError(f"{name}={raw}: expected {expected}")
    return name, value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--traces-dir", default="../shared/traces", help="folder holding the public traces")
    p.add_argument("--policies", type=_csv, default=_csv(DEFAULT_POLICIES), help="comma-separated presets")
    p.add_argument("--estimates", type=_csv, default=["exact", "user"], help="runtime estimate models")
    p.add_argument("--load", type=positive_float, default=0.84, help="target offered load when sizing (default 0.84)")
    p.add_argument("--gpus-per-node", type=positive_int, default=8)
    p.add_argument("--nodes-per-leaf", type=positive_int, default=16)
    p.add_argument("--leaves-per-spine", type=positive_int, default=8)
    p.add_argument("--nvlink-domain", type=positive_int, default=1, help="nodes per NVLink domain (1: per host)")
    p.add_argument(
        "--failures", type=non_negative_float, default=0.0, metavar="RATE", help="node failures per node-day"
    )
    p.add_argument("--repair-hours", type=non_negative_float, default=4.0, help="node repair time after a failure")
    p.add_argument("--seed", type=int, default=1, help="seed for node failures")
    p.add_argument("--period", type=non_negative_float, default=0.0, help="scheduling cycle in s (0: at every event)")
    p.add_argument("--resync", type=positive_float, default=900.0, help="wake the scheduler every S s while gangs wait")
    p.add_argument("--max-jobs", type=non_negative_int, default=0, help="replay only the first N jobs (0: all)")
    p.add_argument("--jobs", "-j", type=positive_int, default=1, help="simulations to run in parallel processes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--cache", type=output_directory, help="folder to keep finished runs in and reuse")


def register(sub) -> None:
    p = sub.add_parser("simulate", help="replay a job trace through the scheduler and baseline policies")
    p.add_argument("--trace", required=True, help="philly | itp:clusterNN | csv:PATH")
    p.add_argument("--nodes", type=positive_int, help="cluster nodes (default: sized to --load)")
    p.add_argument("--out", type=output_directory, help="report folder (default reports/<trace>)")
    p.add_argument(
        "--set",
        type=config_override,
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a scheduler setting (SchedulerConfig field) in every policy of the run; repeatable",
    )
    _common(p)
    p.set_defaults(func=cmd_simulate)

    r = sub.add_parser("simulate-report", help="simulate Philly + every ITP cluster, write the results doc")
    r.add_argument("--all", action="store_true", help="every bundled trace: " + ", ".join(ALL_TRACES))
    r.add_argument("--traces", type=_csv, default=[], help="comma-separated traces instead of --all")
    r.add_argument("--doc", type=output_file, default="docs/simulation-results.md")
    r.add_argument("--plots-dir", type=output_directory, help="PNG folder (default: <doc without .md>/)")
    r.add_argument(
        "--cached-only",
        action="store_true",
        help="assemble the doc from --cache only; runs not there are listed as missing",
    )
    r.add_argument(
        "--notes",
        type=text_file,
        help=f"hand-written Markdown inlined after the targets (kept across regenerations; default: {DEFAULT_NOTES} "
        "where it exists)",
    )
    _common(r)
    r.set_defaults(func=cmd_report)


def _prepare(trace_spec: str, args, nodes: int = 0):
    from railforge.sim.cluster import ClusterShape
    from railforge.sim.traces import Trace, load_trace, size_for_load

    try:
        trace = load_trace(trace_spec, args.traces_dir)
    except FileNotFoundError as error:
        raise UsageError(f"trace {trace_spec}: no file {error.filename}") from None
    except IsADirectoryError as error:
        raise UsageError(f"trace {trace_spec}: {error.filename} is a directory; expected a CSV file") from None
    except UnicodeDecodeError:
        raise UsageError(f"trace {trace_spec}: not UTF-8 text; expected a CSV file") from None
    except OSError as error:
        raise UsageError(f"trace {trace_spec}: {error}") from None
    except ValueError as error:  # names the trace, or the file and line of the bad value
        raise UsageError(str(error)) from None
    if args.max_jobs:
        trace = Trace(trace.name, trace.jobs[: args.max_jobs])
    if not nodes:
        nodes = size_for_load(trace, args.load, args.gpus_per_node)
    shape = ClusterShape(
        nodes=nodes,
        gpus_per_node=args.gpus_per_node,
        nodes_per_leaf=args.nodes_per_leaf,
        leaves_per_spine=args.leaves_per_spine,
        nvlink_domain=args.nvlink_domain,
    )
    return trace, shape


def _specs(trace_spec: str, shape, args):
    """The runs to make; an unknown policy or a setting the scheduler refuses ends the command with
    the reason, before anything runs."""
    from railforge.sim.runner import plan

    try:
        return plan(
            trace_spec,
            shape,
            args.policies,
            args.estimates,
            traces_dir=args.traces_dir,
            failure_rate=args.failures,
            repair_time=args.repair_hours * 3600.0,
            resync=args.resync,
            period=args.period,
            seed=args.seed,
            config_overrides=dict(getattr(args, "set", ())),
        )
    except ValueError as error:
        raise UsageError(str(error)) from None


# the simulator's command line and report rendering: they shape no run, so they key no cached run
_NOT_SIMULATION = {os.path.join("sim", name) for name in ("commands.py", "doc.py", "tables.py")}


@functools.cache
def _code_digest() -> str:
    """Hash of the scheduler's and the simulation's source: a cached run is reused only by the same code. The
    report's rendering (``_NOT_SIMULATION``) is left out, so a change there re-renders from the cache."""
    import hashlib

    import railforge.scheduler
    import railforge.sim

    digest = hashlib.sha256()
    for package in (railforge.scheduler, railforge.sim):
        assert package.__file__ is not None  # a regular package, not a namespace one
        root = os.path.dirname(package.__file__)
        for folder, subfolders, names in os.walk(root):
            subfolders.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if name.endswith(".py") and os.path.relpath(path, os.path.dirname(root)) not in _NOT_SIMULATION:
                    with open(path, "rb") as fh:
                        digest.update(os.path.relpath(path, root).encode() + fh.read())
    return digest.hexdigest()


def run_key(spec, max_jobs: int = 0) -> str:
    """Cache file name of one run: trace, policy, estimates + a hash of everything else, the
    scheduler's and simulator's code included."""
    import hashlib

    blob = repr((spec, max_jobs, _code_digest()))
    safe = "".join(c if c.isalnum() else "-" for c in f"{spec.trace}-{spec.policy}-{spec.estimates}")
    return f"{safe}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}.pickle"


def _run(trace, specs, args):
    """Run the specs on an already loaded (possibly truncated) trace.  With ``--cache DIR`` every
    finished run is stored there and reused, so several processes can share the work (e.g. one
    per policy) and a final run only assembles.  A change to the scheduler or simulator code
    changes every run's key, so runs of older code are not reused."""
    import pickle

    from tqdm import tqdm

    from railforge.sim.runner import run_all, simulate

    cache = args.cache
    paths = [os.path.join(cache, run_key(s, args.max_jobs)) if cache else "" for s in specs]
    out = [None] * len(specs)
    for i, path in enumerate(paths):
        if path and os.path.exists(path):
            with open(path, "rb") as fh:
                out[i] = pickle.load(fh)

    def store(i, res):
        out[i] = res
        if paths[i]:
            os.makedirs(cache, exist_ok=True)
            with open(paths[i] + ".tmp", "wb") as fh:
                pickle.dump(res, fh)
            os.replace(paths[i] + ".tmp", paths[i])

    todo = [i for i in range(len(specs)) if out[i] is None]
    if getattr(args, "cached_only", False):
        return [r for r in out if r is not None]
    if args.max_jobs or args.jobs <= 1:
        for i in todo:
            spec = specs[i]
            desc = f"{trace.name} {spec.policy} ({spec.estimates})"
            with tqdm(total=len(trace.jobs), desc=desc, unit="job", disable=args.no_progress) as bar:
                store(i, simulate(spec, trace, bar.update))
    elif todo:
        results = run_all([specs[i] for i in todo], args.jobs, not args.no_progress)
        for i, res in zip(todo, results, strict=True):
            store(i, res)
    return out


def trace_notes(trace, shape, results, args) -> str:
    from railforge.sim.tables import label

    load = trace.gpu_time / trace.span / shape.total_gpus if trace.span > 0 else float("nan")
    walls = ", ".join(f"{label(r)} {r.counters.get('wall_seconds', 0):.0f} s" for r in results)
    lines = [
        f"{len(trace.jobs):,} jobs over {trace.span / 86400:.1f} days, "
        f"{len(trace.queue_gpu_time())} queue(s); cluster {shape.describe()}; offered load {load:.2f}.",
    ]
    if args.failures:
        lines.append(f"Node failures: {args.failures} per node-day, repaired after {args.repair_hours} h.")
    lines.append(f"Replay wall time: {walls}.")
    return "\n".join(lines)


def cmd_simulate(args) -> int:
    from railforge.sim.tables import write_single_report

    trace, shape = _prepare(args.trace, args, args.nodes)
    specs = _specs(args.trace, shape, args)
    results = _run(trace, specs, args)
    out = str(args.out or os.path.join("reports", trace.name))
    header = f"Command: `railforge {shlex.join(args.argv)}`"
    path = write_single_report(out, trace.name, results, header, trace_notes(trace, shape, results, args))
    print(path)
    return 0


def _regen_command(args) -> str:
    parts = ["railforge", "simulate-report"]
    parts += ["--all"] if args.all else ["--traces", ",".join(args.traces)]
    defaults = {"traces_dir": "../shared/traces", "period": 0.0, "max_jobs": 0, "failures": 0.0, "load": 0.84}
    for key, default in defaults.items():
        value = getattr(args, key)
        if value != default:
            parts += [f"--{key.replace('_', '-')}", str(value)]
    if str(args.doc) != "docs/simulation-results.md":
        parts += ["--doc", str(args.doc)]
    if args.jobs > 1:
        parts += ["--jobs", str(args.jobs)]
    return shlex.join(parts)


def cmd_report(args) -> int:
    """Simulate each trace in turn and rewrite the doc after each one (partial results stay
    readable); see ``_run`` for ``--cache``."""
    from railforge.sim.doc import write_results_doc

    traces = list(ALL_TRACES) if args.all or not args.traces else args.traces
    plots_dir = str(args.plots_dir or os.path.splitext(args.doc)[0])
    sections = []
    for spec in traces:
        trace, shape = _prepare(spec, args)
        specs = _specs(spec, shape, args)
        results = _run(trace, specs, args)
        notes = trace_notes(trace, shape, results, args)
        done = {(r.policy, r.estimates) for r in results}
        missing = [f"{s.policy} ({s.estimates})" for s in specs if (s.policy, s.estimates) not in done]
        if missing:
            notes += f"\n\n**Not finished in time, so missing here:** {', '.join(missing)}."
        sections.append((trace, shape, results, notes))
        elapsed = sum(r.counters.get("wall_seconds", 0.0) for _, _, rs, _ in sections for r in rs)
        write_results_doc(
            str(args.doc), plots_dir, sections, _regen_command(args), elapsed, str(args.notes or DEFAULT_NOTES)
        )
    print(args.doc)
    return 0
