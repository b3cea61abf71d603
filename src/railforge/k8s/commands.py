"""``railforge scheduler run``: the gang scheduler against a cluster, until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

from railforge.cliargs import UsageError, kube_client, text_file


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("scheduler", help="the gang scheduler on Kubernetes")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", help="schedule the pods that name this scheduler (docs/scheduler.md)")
    run.add_argument("--kubeconfig", type=text_file, help="kubeconfig file (default: in-cluster service account)")
    run.add_argument("--config", type=Path, help="settings file, YAML (docs/scheduler.md lists the keys)")
    run.add_argument("--identity", help="this replica's name in the leader-election Lease (default: host-pid)")
    run.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    run.add_argument(
        "--http-address",
        default="127.0.0.1:8480",
        help="HOST:PORT of the read-only dashboard and /metrics (default: loopback); 'off' serves nothing",
    )
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from kubernetes import config

    from railforge.k8s.adapter import Adapter
    from railforge.k8s.dashboard import parse_address, serve
    from railforge.k8s.settings import SettingsError, load_settings

    try:
        settings = load_settings(args.config)
    except SettingsError as error:
        raise UsageError(f"--config: {error}") from None
    try:
        address = None if args.http_address == "off" else parse_address(args.http_address)
    except ValueError as error:
        raise UsageError(f"--http-address {error}") from None
    if args.kubeconfig is not None:  # the adapter asks the API server what it serves as it starts
        api = kube_client(args.kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException as error:
            raise UsageError(f"no --kubeconfig and not in a pod: {error}") from None
        from kubernetes.client import ApiClient

        api = ApiClient()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    adapter = Adapter(api, settings, identity=args.identity).start()
    server = None
    try:
        if address is not None:
            try:
                server = serve(adapter, *address)
            except OSError as error:  # taken, or not an address of this host
                raise UsageError(f"--http-address {args.http_address}: cannot serve there ({error})") from None
        stop.wait()
    finally:
        if server is not None:
            server.stop()
        adapter.stop()
        api.close()
    return 0
