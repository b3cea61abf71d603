"""The benchmark jobs of ``playbooks/benchmark.yml``, rendered from our templates and the nodes' hardware facts.

- an MPIJob (kubeflow.org/v2beta1, deploy/openmpi/mpijob.yml.j2) across the nodes, gang-scheduled by railforge
  (mpi-operator's ``--gang-scheduling=railforge``): on GPU nodes nccl-tests' ``all_reduce_perf``, one rank per GPU,
  each worker filling its node's GPUs, attached to every rail (the rails' NetworkAttachmentDefinitions) with one
  RDMA device of each and NCCL's settings of the node class (``railforge_nccl_env``) handed to every rank; on a
  cluster without GPUs (``mode: cpu``) the same template runs the OpenMPI image's ``allreduce`` instead;
- with an image for it (``resnet_image``; in CPU mode the project's own, versions_resnet50_image), a second MPIJob
  of the same template: deploy/openmpi/railforge-resnet50, ResNet-50 training on synthetic data with PyTorch DDP,
  over NCCL on GPUs (the rails' settings as above), over Gloo on the pod network in CPU mode (small images, a few
  steps: the CPU fallback proves the plumbing); on GPU nodes railforge starts it once the first has freed the GPUs;
  and for scaling, the same job with fewer workers (``resnet_scaling``: on GPU nodes one node's worth by default),
  named ``<job>-resnet50-w<workers>``: the judge rates the full job's images/s per GPU against the smallest run's;
- per rail, a ring of perftest pairs (deploy/benchmark/perftest-pair.yml.j2): node i serves, node i+1 is the
  client, so every node is measured once as a client on every rail (GPU mode, two nodes or more); each pair is a
  gang railforge starts whole, its pods pinned to their nodes by nodeSelector kubernetes.io/hostname.

The plan is what the playbook hands over (``railforge bench render``): a mapping, checked whole before anything is
rendered; a :class:`PlanError` names the ``railforge_benchmark_*`` variable at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from railforge import plugin_code

if TYPE_CHECKING:
    from railforge.bench.floors import HardwareClass

ROOT = Path(__file__).resolve().parents[3]
MPIJOB_TEMPLATE = ROOT / "deploy/openmpi/mpijob.yml.j2"
PERFTEST_TEMPLATE = ROOT / "deploy/benchmark/perftest-pair.yml.j2"
MODES = ("gpu", "cpu")
PERFTEST_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_write_lat", "ib_read_lat")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# nccl-tests: 8 B to 8 GiB doubling, one GPU per rank, results checked (the judge reads #wrong)
NCCL_ARGS = ("-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1")
# railforge-resnet50: batch 32 per GPU at 224 px (the seeds' scaling run); on CPU a few small steps
RESNET_ARGS = {
    "gpu": ("--device", "cuda", "--batch", "32", "--steps", "100", "--warmup", "10"),
    "cpu": (
        *("--device", "cpu", "--batch", "4", "--image-size", "64"),
        *("--steps", "5", "--warmup", "1", "--log-every", "1"),
    ),
}
RESNET_SUFFIX = "-resnet50"
# on every object of a benchmark run: the run it belongs to (its first job's name); benchmark.yml removes what an
# earlier run left by it
RUN_LABEL = "railforge.io/benchmark-job"


class PlanError(ValueError):
    """A benchmark plan that cannot be rendered; the message starts with the variable at fault."""


@dataclass(frozen=True)
class PlanNode:
    name: str
    gpus: int
    rails: tuple[dict, ...]  # railforge_hw rails: hca, port, netdev, link_layer
    nccl_env: dict[str, str]


@dataclass(frozen=True)
class Plan:
    cluster: str
    namespace: str
    job_name: str
    mode: str
    image: str
    nodes: tuple[PlanNode, ...]
    workers: int
    queue: str = ""
    scheduler_name: str = "railforge"  # the perftest pods' schedulerName (mpi-operator sets the MPIJobs' pods')
    perftest_image: str = ""
    perftest_tools: tuple[str, ...] = ("ib_write_bw",)
    perftest_bytes: int = 8388608
    # the perftest tools whose floors are for GPU memory: their pods take a GPU and run with --use_cuda
    perftest_gpu_memory: tuple[str, ...] = ()
    rail_namespace: str = "railforge-network"
    rail_prefix: str = "rail"
    rdma_prefix: str = "rdma"
    nccl_args: tuple[str, ...] = NCCL_ARGS
    allreduce_elements: int = 1 << 20
    worker_cpu: str = "500m"
    worker_memory: str = "256Mi"
    gid_index: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)
    resnet_image: str = ""  # none: no ResNet-50 job
    resnet_args: tuple[str, ...] = ()  # none: RESNET_ARGS of the mode
    resnet_worker_memory: str = ""  # none: 2Gi per CPU worker, 4Gi per GPU
    resnet_scaling: tuple[int, ...] = ()  # worker counts of the smaller ResNet-50 jobs, for the scaling figures


@dataclass(frozen=True)
class Pair:
    rail: int
    hca: str
    port: int
    server: str
    client: str
    tool: str

    @property
    def name(self) -> str:
        return f"pt-{self.tool.replace('_', '-')}-r{self.rail}-{self.client}"[:63].rstrip("-")


def _text(data: Mapping, key: str, default: str | None = None, label: bool = False) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise PlanError(f"{_variable(key)}: expected a non-empty string, got {value!r}")
    if label and not DNS_LABEL.match(value):
        raise PlanError(f"{_variable(key)}: {value!r} is not a DNS label (lower case, digits, '-')")
    return value


# the rail_networks role's variables the plan reads (its defaults repeated in Plan and plan_from_mapping)
RAIL_SETTINGS = {
    "rail_networks_namespace": "rail_namespace",
    "rail_networks_name_prefix": "rail_prefix",
    "rail_networks_resource_prefix": "rdma_prefix",
    "rail_networks_nccl_socket_ifname": "nccl_socket_ifname",
    "rail_networks_nccl_gid_index": "nccl_gid_index",
}


def _variable(key: str) -> str:
    """The inventory variable behind a plan key."""
    return next((name for name, mine in RAIL_SETTINGS.items() if mine == key), f"railforge_benchmark_{key}")


def _rail_settings(given: object) -> dict:
    if not isinstance(given, dict) or not set(given) <= set(RAIL_SETTINGS):
        raise PlanError(f"rail_networks: expected some of {', '.join(RAIL_SETTINGS)}, got {given!r}")
    return {RAIL_SETTINGS[name]: value for name, value in given.items()}


def _cluster(value: object) -> str:
    if not isinstance(value, str) or not DNS_LABEL.match(value):
        raise PlanError(f"railforge_cluster_name: expected a DNS label naming the cluster, got {value!r}")
    return value


def _count(data: Mapping, key: str, default: int, minimum: int = 1) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(f"{_variable(key)}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _node(name: str, facts: object, mode: str, socket_ifname: str, gid_index: int) -> PlanNode:
    """A node from its railforge_hw facts ({} where the inventory has none: CPU mode only)."""
    where = f"railforge_benchmark_nodes: node {name}"
    if not isinstance(facts, dict):
        raise PlanError(f"{where}: expected its railforge_hw facts (a mapping), got {facts!r}")
    if mode == "cpu":
        return PlanNode(name, 0, (), {})
    gpus = facts.get("gpu_count", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise PlanError(
            f"{where}: railforge_hw shows {gpus!r} GPUs; mode gpu needs GPU nodes with their facts gathered "
            "(set railforge_benchmark_mode: cpu on a cluster without GPUs)"
        )
    rails = facts.get("rails") or []
    if not isinstance(rails, list) or not all(isinstance(r, dict) and r.get("hca") for r in rails):
        raise PlanError(f"{where}: railforge_hw rails: expected a list of rails with hca, got {rails!r}")
    # one rail per HCA port, as rail_networks numbers them
    distinct = tuple({(r["hca"], r.get("port", 1)): r for r in rails}.values())
    env = plugin_code.load("filter/railforge_hw.py").railforge_nccl_env(facts, socket_ifname or None, gid_index)
    return PlanNode(name, gpus, distinct, {str(k): str(v) for k, v in env.items()})


def plan_from_mapping(data: Mapping) -> Plan:
    """Check and read the playbook's plan; the first mistake is a PlanError naming its variable."""
    if not isinstance(data, Mapping):
        raise PlanError(f"railforge_benchmark: expected a mapping, got {data!r}")
    mode = data.get("mode", "gpu")
    if mode not in MODES:
        raise PlanError(f"railforge_benchmark_mode: expected one of {', '.join(MODES)}, got {mode!r}")
    names = data.get("nodes")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise PlanError(f"railforge_benchmark_nodes: expected a list of at least one node name, got {names!r}")
    facts = data.get("facts") or {}
    if not isinstance(facts, dict):
        raise PlanError(f"railforge_benchmark_nodes: expected the nodes' railforge_hw facts by name, got {facts!r}")
    data = {**data, **_rail_settings(data.get("rail_networks") or {})}
    gid_index = _count(data, "nccl_gid_index", 3, minimum=0)
    socket_ifname = _text(data, "nccl_socket_ifname", "eth0")
    nodes = tuple(_node(name, facts.get(name, {}), mode, socket_ifname, gid_index) for name in sorted(set(names)))
    workers = _count(data, "workers", len(nodes))
    tools = data.get("perftest_tools", ["ib_write_bw"])  # a list: one name alone is refused whole
    unknown = [tool for tool in tools if tool not in PERFTEST_TOOLS] if isinstance(tools, list | tuple) else [tools]
    if unknown:
        expected = ", ".join(PERFTEST_TOOLS)
        raise PlanError(f"railforge_benchmark_perftest_tools: {unknown[0]!r}; expected a list of some of {expected}")
    nccl_args = data.get("nccl_args", NCCL_ARGS)
    if not isinstance(nccl_args, list | tuple) or not all(isinstance(a, str | int) for a in nccl_args):
        raise PlanError(f"railforge_benchmark_nccl_args: expected a list of arguments, got {nccl_args!r}")
    resnet_args = data.get("resnet_args", [])
    if not isinstance(resnet_args, list | tuple) or not all(isinstance(a, str | int) for a in resnet_args):
        raise PlanError(f"railforge_benchmark_resnet_args: expected a list of arguments, got {resnet_args!r}")
    extra_env = data.get("extra_env") or {}
    if not isinstance(extra_env, dict):
        raise PlanError(f"railforge_benchmark_extra_env: expected a mapping of NCCL_* -> value, got {extra_env!r}")
    plan = Plan(
        cluster=_cluster(data.get("cluster")),
        namespace=_text(data, "namespace", label=True),
        job_name=_text(data, "job_name", "railforge-bench", label=True),
        mode=mode,
        image=_text(data, "image"),
        nodes=nodes,
        workers=workers,
        queue=_text(data, "queue", ""),
        scheduler_name=_text(data, "scheduler_name", "railforge", label=True),
        perftest_image=_text(data, "perftest_image", ""),
        perftest_tools=tuple(tools),
        perftest_bytes=_count(data, "perftest_bytes", 8388608),
        rail_namespace=_text(data, "rail_namespace", "railforge-network", label=True),
        rail_prefix=_text(data, "rail_prefix", "rail"),
        rdma_prefix=_text(data, "rdma_prefix", "rdma"),
        nccl_args=tuple(str(a) for a in nccl_args),
        allreduce_elements=_count(data, "allreduce_elements", 1 << 20),
        worker_cpu=_text(data, "worker_cpu", "500m"),
        worker_memory=_text(data, "worker_memory", "256Mi"),
        gid_index=str(gid_index) if nodes[0].nccl_env.get("NCCL_IB_GID_INDEX") else "",
        extra_env={str(k): str(v) for k, v in extra_env.items()},
        resnet_image=_text(data, "resnet_image", ""),
        resnet_args=tuple(str(a) for a in resnet_args),
        resnet_worker_memory=_text(data, "resnet_worker_memory", ""),
    )
    plan = replace(plan, resnet_scaling=_resnet_scaling(data, plan))
    longest = max((resnet_job_name(plan, workers) for workers in (None, *plan.resnet_scaling)), key=len)
    if plan.resnet_image and len(longest + "-launcher") > 63:
        raise PlanError(f"railforge_benchmark_job_name: {plan.job_name!r} is too long for its ResNet-50 job's pods")
    if mode == "gpu":
        _same_across_nodes(plan)
    floors = _check_floors(data).floors
    if mode == "gpu":
        in_gpu_memory = tuple(tool for tool in tools if tool in floors and floors[tool].memory == "gpu")
        plan = replace(plan, perftest_gpu_memory=in_gpu_memory)
    return plan


def images_on_nodes(plan: Plan, node_images: Mapping[str, list[str]]) -> tuple[Plan, list[str]]:
    """The plan for nodes that hold ``node_images`` (each node's image names, as its status lists them), and one
    line for each job left out. A ``localhost/`` image is a local build that no registry serves: a node that lacks it
    cannot start the pod. The MPIJob's and perftest's images are the benchmark: lacking, a PlanError; the ResNet-50
    job is left out, in one line. A node missing from ``node_images`` is not checked."""
    notes = []
    needed = [(plan.image, "image")] + ([(plan.perftest_image, "perftest_image")] if perftest_pairs(plan) else [])
    for image, variable in needed:
        lacking = _lacking(image, plan, node_images)
        if lacking:
            raise PlanError(
                f"{_variable(variable)}: {image} is not on node {', '.join(lacking)}, and no registry serves a "
                "localhost/ image; load it on the nodes (kubernetes_image_archives) or name an image of a registry"
            )
    lacking = _lacking(plan.resnet_image, plan, node_images)
    if lacking:
        notes.append(
            f"{_variable('resnet_image')}: {plan.resnet_image} is not on node {', '.join(lacking)}: the ResNet-50 "
            "job is left out (deploy/openmpi/build.sh resnet50 writes its archive to load on the nodes; "
            "railforge_benchmark_resnet_image: '' leaves it out without this line)"
        )
        plan = replace(plan, resnet_image="", resnet_scaling=())
    return plan, notes


def _lacking(image: str, plan: Plan, node_images: Mapping[str, list[str]]) -> list[str]:
    """The plan's nodes that do not hold ``image``, a ``localhost/`` one (others are pulled)."""
    if not image.startswith("localhost/"):
        return []
    return [node.name for node in plan.nodes if node.name in node_images and image not in node_images[node.name]]


def _resnet_scaling(data: Mapping, plan: Plan) -> tuple[int, ...]:
    """The smaller ResNet-50 jobs' worker counts: given, or one worker (one node) in mode gpu with more than one."""
    given = data.get("resnet_scaling")
    if given is None:
        return (1,) if plan.mode == "gpu" and plan.workers > 1 and plan.resnet_image else ()
    counts = given if isinstance(given, list | tuple) else [given]
    if not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c < plan.workers for c in counts):
        raise PlanError(
            f"railforge_benchmark_resnet_scaling: expected worker counts from 1 to {plan.workers - 1} "
            f"(fewer than the full job's {plan.workers}), got {given!r}"
        )
    return tuple(sorted(set(counts)))


def _check_floors(data: Mapping) -> HardwareClass:
    """The class and its floors (with railforge_benchmark_floors), checked before anything runs."""
    from railforge.bench.floors import VARIABLE, FloorsError, load_floors

    name = data.get("hardware_class")
    if not isinstance(name, str) or not name:
        raise PlanError(f"railforge_benchmark_hardware_class: expected a class of floors.yml, got {name!r}")
    try:
        return load_floors(name, data.get("floors") or None, origin=VARIABLE)
    except FloorsError as error:
        message = str(error)
        if message.startswith("hardware class"):
            raise PlanError(f"railforge_benchmark_hardware_class: {message}") from None
        raise PlanError(message if message.startswith("railforge_") else f"{VARIABLE}: {message}") from None


def _same_across_nodes(plan: Plan) -> None:
    """One job has one shape: the same GPUs, rails and NCCL settings on every node, else name the odd node."""
    first = plan.nodes[0]
    for node in plan.nodes[1:]:
        for what, mine, theirs in (
            ("gpus", node.gpus, first.gpus),
            ("rails", [r["hca"] for r in node.rails], [r["hca"] for r in first.rails]),
            ("nccl_env", node.nccl_env, first.nccl_env),
        ):
            if mine != theirs:
                raise PlanError(
                    f"railforge_benchmark_nodes: node {node.name} has {what} {mine!r} but {first.name} has {theirs!r};"
                    " benchmark nodes of one class at a time"
                )
    if plan.workers != len(plan.nodes):
        raise PlanError(
            f"railforge_benchmark_workers: mode gpu runs one worker per node ({len(plan.nodes)}), got {plan.workers}"
        )


def _template(path: Path):
    import jinja2

    return jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True).from_string(path.read_text())


def rail_names(plan: Plan) -> list[str]:
    return [f"{plan.rail_prefix}{index}" for index in range(len(plan.nodes[0].rails))]


def mpijob_variables(plan: Plan) -> dict:
    """The variables of deploy/openmpi/mpijob.yml.j2 for the plan."""
    variables = {
        "job_name": plan.job_name,
        "job_namespace": plan.namespace,
        "job_labels": {RUN_LABEL: plan.job_name},
        "image": plan.image,
        "workers": plan.workers,
        "queue": plan.queue,
        "node_names": [node.name for node in plan.nodes],
        "spread_workers": plan.workers <= len(plan.nodes),  # more workers than nodes (mode cpu) share them
        "worker_cpu": plan.worker_cpu,
        "worker_memory": plan.worker_memory,
    }
    if plan.mode == "cpu":
        return {
            **variables,
            "slots_per_worker": 1,
            "program": ["allreduce", "--elements", str(plan.allreduce_elements)],
        }
    node = plan.nodes[0]
    rails = rail_names(plan)
    env = {**node.nccl_env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", **plan.extra_env}
    return {
        **variables,
        "slots_per_worker": node.gpus,
        "gpus_per_worker": node.gpus,
        "worker_resources": {f"{plan.rdma_prefix}/{rail}": 1 for rail in rails},
        "worker_networks": [f"{plan.rail_namespace}/{rail}" for rail in rails],
        "worker_capabilities": ["IPC_LOCK"] if rails else [],
        "mpirun_env": env,
        "program": ["all_reduce_perf", *plan.nccl_args],
    }


def render_mpijob(variables: dict) -> dict:
    return yaml.safe_load(_template(MPIJOB_TEMPLATE).render(**variables))


def resnet_job_name(plan: Plan, workers: int | None = None) -> str:
    """The full ResNet-50 job's name, or with ``workers`` that of a smaller one of the scaling series."""
    return plan.job_name + RESNET_SUFFIX + (f"-w{workers}" if workers else "")


def resnet_variables(plan: Plan, workers: int | None = None) -> dict:
    """The template's variables for the ResNet-50 job: the first job's nodes, rails and devices, another program;
    with ``workers``, that many of them (a job of the scaling series)."""
    variables = {**mpijob_variables(plan), "workers": workers or plan.workers}
    if plan.mode == "cpu":
        # Gloo over the pod network; one thread per rank, as each worker asks for a share of a core
        env, memory = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}, "2Gi"
    else:
        env, memory = variables["mpirun_env"], f"{4 * plan.nodes[0].gpus}Gi"
    return {
        **variables,
        "job_name": resnet_job_name(plan, workers),
        "image": plan.resnet_image,
        "worker_memory": plan.resnet_worker_memory or memory,
        "mpirun_env": env,
        "program": ["railforge-resnet50", *(plan.resnet_args or RESNET_ARGS[plan.mode])],
    }


def perftest_pairs(plan: Plan) -> list[Pair]:
    """Per rail and tool, a ring over the nodes (i serves, i+1 is the client); none in CPU mode or on one node."""
    if plan.mode == "cpu" or len(plan.nodes) < 2:
        return []
    names = [node.name for node in plan.nodes]
    pairs = []
    for tool in plan.perftest_tools:
        for index, rail in enumerate(plan.nodes[0].rails):
            for position, server in enumerate(names):
                client = names[(position + 1) % len(names)]
                pairs.append(Pair(index, rail["hca"], int(rail.get("port", 1)), server, client, tool))
    return pairs


def render_perftest(plan: Plan, pair: Pair) -> list[dict]:
    if not plan.perftest_image:
        raise PlanError("railforge_benchmark_perftest_image: expected an image with perftest for the rail pairs")
    rail = f"{plan.rail_prefix}{pair.rail}"
    text = _template(PERFTEST_TEMPLATE).render(
        pair_name=pair.name,
        pair_namespace=plan.namespace,
        scheduler_name=plan.scheduler_name,
        queue=plan.queue,
        image=plan.perftest_image,
        tool=pair.tool,
        server_node=pair.server,
        client_node=pair.client,
        hca=pair.hca,
        port=pair.port,
        network=f"{plan.rail_namespace}/{rail}",
        rdma_resource=f"{plan.rdma_prefix}/{rail}",
        message_bytes=plan.perftest_bytes,
        use_cuda=pair.tool in plan.perftest_gpu_memory,
        gid_index=plan.gid_index,
        labels={RUN_LABEL: plan.job_name},
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_all(plan: Plan) -> list[dict]:
    """Every object of the run, in the order they are applied."""
    objects = [render_mpijob(mpijob_variables(plan))]
    if plan.resnet_image:
        objects.append(render_mpijob(resnet_variables(plan)))
        objects += [render_mpijob(resnet_variables(plan, workers)) for workers in plan.resnet_scaling]
    for pair in perftest_pairs(plan):
        objects += render_perftest(plan, pair)
    return objects
