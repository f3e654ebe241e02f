"""`clustersim collective`: an nccl-tests-style table predicted for a cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from simulator.cli import topology_args as cluster
from simulator.cli.calibration_args import (
    CALIBRATION_HELP,
    FORCE_HELP,
    calibration_for,
    load_profile,
    warn_of_other_selection,
)
from simulator.cli.common import parse_env, printable, reflowed, size_option
from simulator.cli.fault_args import LinkFaultOpt, with_link_faults
from simulator.collectives.busbw import COLLECTIVES, collective_name
from simulator.collectives.comm import comm_view
from simulator.collectives.harness import host_issue_s
from simulator.collectives.nccl_releases import NCCL_VERSION_HELP, release_option
from simulator.collectives.predict import collective_table, size_sweep
from simulator.collectives.select import ALGO_CHOICES, PROTO_CHOICES, SELECTION_HELP, selection_option
from simulator.collectives.transports import plugin_env
from simulator.core.errors import ConfigError
from simulator.measurements.nccl_tests import NcclRow
from simulator.measurements.nccl_tests_format import format_nccl_tests_table
from topologies.build import build_representative

REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
ROOT = {"broadcast": 0, "reduce": 0}

HELP = """Predict an NCCL collective over a size sweep, printed like nccl-tests.

Columns: time is one collective's time; algbw = size / time; busbw = algbw x the nccl-tests
factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; others 1).
The algorithm and protocol are the pair the model prices fastest (--selection model, the
default) or those NCCL's tuner would choose (--selection nccl, of the release given by
--nccl-version, default the newest), unless pinned; the time is the physical model's. With
--calibration the selection defaults to the one the profile's fit used (nccl unless fitted
otherwise), and the release to that of its logs.

Examples:

  clustersim collective                                  # all_reduce on one DGX H100 node

  clustersim collective --topology dgx-a100 --nodes 4 --op all_gather -b 1M -e 1G

  clustersim collective --gpu H100-SXM5-80GB --gpus-per-node 8 --nodes 2
      --intra-node nvswitch-nvlink4 --transport efa --nics-per-node 32 --nic-gbps 100

  clustersim collective --topology dgx-h100 --algo ring --proto simple --json

  clustersim collective --topology dgx-a100 --nodes 4 --selection nccl --nccl-version 2.8.4

  clustersim collective --topology abci-a --nodes 8 --calibration abci-profile.yaml

  clustersim collective --topology dgx-a100 -g 8      # as `all_reduce_perf -g 8` times it

-g N prices the loop as nccl-tests runs it when one thread drives N GPUs: the thread issues
every GPU's launch in turn, about 5 us each, so no size takes less than N x 5 us. Training
frameworks drive one GPU per process (the default, -g 1).
"""


def register(app: typer.Typer) -> None:
    """Add the `collective` command to the app."""
    app.command("collective", help=reflowed(HELP))(collective)


def collective(
    topology: Annotated[str, typer.Option(help="Preset name or topology YAML file.")] = "dgx-h100",
    nodes: Annotated[int | None, typer.Option(help="Number of nodes (servers). Default: the preset's.")] = None,
    op: Annotated[str, typer.Option(help=f"Collective: {', '.join(COLLECTIVES)} (or as nccl-tests names its "
                                    "tools: allreduce, all_reduce_perf).")] = "all_reduce",
    min_bytes: Annotated[str, typer.Option("-b", "--minbytes", help="Smallest size (8, 64K, 1M, 8G).")] = "8",
    max_bytes: Annotated[str, typer.Option("-e", "--maxbytes", help="Largest size.")] = "8G",
    factor: Annotated[int, typer.Option("-f", "--stepfactor", help="Size multiplier between rows.")] = 2,
    algo: Annotated[str, typer.Option(help=f"Pin the algorithm: {', '.join(ALGO_CHOICES)}.")] = "auto",
    proto: Annotated[str, typer.Option(help=f"Pin the protocol: {', '.join(PROTO_CHOICES)}.")] = "auto",
    env: Annotated[str | None, typer.Option(help="NCCL environment, e.g. 'NCCL_ALGO=ring NCCL_NVLS_ENABLE=0'.")] = None,
    dtype: Annotated[str, typer.Option(help="Element type (sets the count column).")] = "float",
    engine: Annotated[bool, typer.Option(help="Run each size through the SimPy flow engine.")] = False,
    calibration: Annotated[Path | None, typer.Option(help=CALIBRATION_HELP)] = None,
    force_calibration: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
    nccl_version: Annotated[str | None, typer.Option(help=NCCL_VERSION_HELP)] = None,
    selection: Annotated[str | None, typer.Option(help=SELECTION_HELP)] = None,
    gpus_per_thread: Annotated[int, typer.Option(
        "-g", "--gpus-per-thread", min=1,
        help="GPUs one nccl-tests thread drives (its -g): small sizes take at least this many host launches.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
    gpu: cluster.GpuOpt = None,
    gpus_per_node: cluster.GpusPerNodeOpt = None,
    intra_node: cluster.IntraNodeOpt = None,
    transport: cluster.TransportOpt = None,
    nics_per_node: cluster.NicsPerNodeOpt = None,
    nic_gbps: cluster.NicGbpsOpt = None,
    host_cpu: cluster.HostCpuOpt = None,
    link_fault: LinkFaultOpt = None,
) -> None:
    op = collective_name(op)
    if op not in COLLECTIVES:
        raise ConfigError(f"--op: unknown collective {op!r} (valid: {', '.join(COLLECTIVES)})")
    if op in ("alltoall", "sendrecv") and algo != "auto":
        raise ConfigError(f"--algo {algo}: {op} is point-to-point sends, with no algorithm to choose (NCCL ignores "
                          "NCCL_ALGO for it); leave --algo auto")
    sizes = size_sweep(size_option(min_bytes, "-b"), size_option(max_bytes, "-e"), factor)
    spec = cluster.ClusterFlags(gpu, gpus_per_node, intra_node, transport, nics_per_node, nic_gbps,
                                host_cpu).resolve(topology, nodes)
    spec = with_link_faults(spec, link_fault)
    view = comm_view(build_representative(spec))
    profile = load_profile(calibration)
    fitted = calibration_for(profile, spec.gpu, spec.intra_node, view, force_calibration)
    release = release_option(nccl_version) or fitted.release  # a profile's logs tell the release where none is given
    user_env = parse_env(env)
    plugin = {name: value for name, value in plugin_env(view.transport, view.arch, view.gpudirect_rdma).items()
              if name not in user_env and not (name == "NCCL_PROTO" and proto != "auto")}
    stated = None if selection is None else selection_option(selection)
    warn_of_other_selection(profile, stated, "--selection")
    rows = collective_table(view, op, sizes, algo, proto, user_env, dtype, use_engine=engine, params=fitted.params,
                            nccl_release=release, selection=fitted.selection_or(stated),
                            gpus_per_thread=gpus_per_thread)
    if as_json:
        payload = {"topology": spec.name, "nodes": spec.nodes, "ranks": view.n_ranks, "op": op,
                   "gpus_per_thread": gpus_per_thread, "plugin_env": plugin,
                   "rows": [{"size_bytes": r.size_bytes, "time_us": round(r.time_us, 3),
                             "algbw_GBps": round(r.algbw_GBps, 3), "busbw_GBps": round(r.busbw_GBps, 3),
                             "algo": r.algo, "proto": r.proto} for r in rows]}
        typer.echo(json.dumps(payload, indent=2))
        return
    table_rows = [
        NcclRow(size_bytes=r.size_bytes, count=r.count, dtype=r.dtype, redop=REDOP.get(op, "none"),
                root=ROOT.get(op, -1), time_us=r.time_us, algbw_GBps=r.algbw_GBps, busbw_GBps=r.busbw_GBps,
                inplace_time_us=None, inplace_algbw_GBps=None, inplace_busbw_GBps=None, line_no=0)
        for r in rows
    ]
    typer.echo(f"# clustersim prediction: {op} on {printable(spec.name or 'cluster')}: {spec.nodes} node(s) x "
               f"{spec.gpus_per_node} {spec.gpu} ({view.n_ranks} ranks)")
    if plugin:
        settings = " ".join(f"{name}={value}" for name, value in plugin.items())
        typer.echo(f"# {settings}: set by aws-ofi-nccl, the EFA network plugin, on this cluster; --env overrides it")
    if gpus_per_thread > 1:
        typer.echo(f"# one thread issues {gpus_per_thread} GPUs' launches an iteration: no size below "
                   f"{host_issue_s(gpus_per_thread) * 1e6:.0f} us")
    typer.echo(format_nccl_tests_table(table_rows, op, algos=[r.algo for r in rows],
                                       protos=[r.proto for r in rows]), nl=False)
