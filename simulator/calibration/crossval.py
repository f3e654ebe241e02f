"""Honest error figures: fit on some measurements of a cluster, predict the others.

Splits (`group_by`):
- cluster: leave one log out. Within each cluster (same hardware and NCCL version, as the
  manifest states them; logs of unknown NCCL version are their own cluster), fit on the other
  logs and predict the held-out one.
- nodes: within each cluster, fit on the logs of at most `train_max_nodes` nodes and predict the
  larger node counts (the capacity planner's question: measure small, predict big).
- size: within each cluster, fit on every other size (sorted) of every log and predict the rest,
  then swap the halves.
Every held-out row is predicted twice, with the prior and with the calibration fitted without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from simulator.calibration.fit import FitOptions, fit_hardware
from simulator.collectives.params import prior_params
from simulator.measurements.dataset import HardwareKey, MeasuredLog
from simulator.validation.accuracy import ErrorSummary, LogReport, ValidationReport
from simulator.validation.run import predict_log

GROUP_BY = ("cluster", "nodes", "size")


@dataclass(frozen=True)
class HeldOut:
    """One held-out log (or half of one): prior and calibrated predictions of its rows."""

    cluster: str
    split: str
    prior: LogReport
    calibrated: LogReport


@dataclass(frozen=True)
class CrossvalReport:
    group_by: str
    held_out: tuple[HeldOut, ...]

    @property
    def prior(self) -> ValidationReport:
        return ValidationReport(tuple(h.prior for h in self.held_out))

    @property
    def calibrated(self) -> ValidationReport:
        return ValidationReport(tuple(h.calibrated for h in self.held_out))


def cluster_key(log: MeasuredLog) -> tuple[str, str, str]:
    """(GPU, intra-node fabric, NCCL version and the network provider's settings); single-node logs join the
    cluster of the same hardware and NCCL version. libfabric's settings (FI_* in the entry's env: the CXI and
    EFA providers' rendezvous and matching modes) are the transport's software, which the model does not read
    and a fit would have to average: logs that set them differently are different clusters."""
    version = log.entry.nccl or "unknown"
    if version.startswith("unknown"):
        version = f"unknown ({log.file})"
    provider = " ".join(f"{name}={value}" for name, value in sorted(log.entry.env.items()) if name.startswith("FI_"))
    return log.entry.gpu, log.entry.intra_node, f"{version} {provider}".strip()


def clusters(logs: Sequence[MeasuredLog]) -> dict[tuple[str, str, str], list[MeasuredLog]]:
    groups: dict[tuple[str, str, str], list[MeasuredLog]] = {}
    for log in logs:
        groups.setdefault(cluster_key(log), []).append(log)
    return dict(sorted(groups.items()))


def _hardware(logs: Sequence[MeasuredLog]) -> HardwareKey:
    networked = [log.hardware for log in logs if log.hardware.transport is not None]
    return networked[0] if networked else logs[0].hardware


def _held_out(name: str, split: str, train: Sequence[MeasuredLog], test: Sequence[MeasuredLog],
              options: FitOptions | None, tick: Callable[[], None] | None) -> list[HeldOut]:
    section = fit_hardware(_hardware(list(train) + list(test)), train, options, tick)
    return [
        HeldOut(name, split, predict_log(log), predict_log(log, section.apply(prior_params(log.view))))
        for log in test
    ]


def _halves(log: MeasuredLog) -> tuple[MeasuredLog, MeasuredLog]:
    rows = sorted(log.rows, key=lambda r: r.size_bytes)
    return replace(log, rows=tuple(rows[0::2])), replace(log, rows=tuple(rows[1::2]))


def splits(logs: Sequence[MeasuredLog], group_by: str,
           train_max_nodes: int = 2) -> list[tuple[str, str, list[MeasuredLog], list[MeasuredLog]]]:
    """(cluster, split description, train logs, test logs) for every fit the report needs."""
    out = []
    for key, members in clusters(logs).items():
        name = " / ".join(key)
        if group_by == "cluster":
            out += [(name, f"leave out {m.file}", [o for o in members if o is not m], [m])
                    for m in members if len(members) > 1]
        elif group_by == "nodes":
            train = [m for m in members if m.entry.nodes <= train_max_nodes]
            test = [m for m in members if m.entry.nodes > train_max_nodes]
            if train and test:
                out.append((name, f"fit <= {train_max_nodes} nodes, predict more", train, test))
        else:
            halves = [_halves(m) for m in members if len(m.rows) >= 4]
            if halves:
                even, odd = [h[0] for h in halves], [h[1] for h in halves]
                out += [(name, "fit even sizes, predict odd", even, odd),
                        (name, "fit odd sizes, predict even", odd, even)]
    return out


def crossval(logs: Sequence[MeasuredLog], group_by: str, train_max_nodes: int = 2,
             options: FitOptions | None = None, tick: Callable[[], None] | None = None) -> CrossvalReport:
    """Run every split (see module docstring); `tick` is called once per model evaluation."""
    held: list[HeldOut] = []
    for name, split, train, test in splits(logs, group_by, train_max_nodes):
        held += _held_out(name, split, train, test, options, tick)
    return CrossvalReport(group_by, tuple(held))


def crossval_to_json(report: CrossvalReport) -> dict[str, object]:
    """The `clustersim crossval --json` object: each held-out log's prior and calibrated error, and the totals."""

    def summary(s: ErrorSummary) -> dict[str, object]:
        return {"points": s.points, "median_abs_pct_error": s.median_abs_pct_error,
                "p90_abs_pct_error": s.p90_abs_pct_error}

    return {
        "group_by": report.group_by,
        "held_out": [
            {"cluster": h.cluster, "split": h.split, "file": h.prior.file,
             "prior": {"ge_1MiB": summary(h.prior.large), "lt_1MiB": summary(h.prior.small)},
             "calibrated": {"ge_1MiB": summary(h.calibrated.large), "lt_1MiB": summary(h.calibrated.small)}}
            for h in report.held_out
        ],
        "prior": {"ge_1MiB": summary(report.prior.large), "lt_1MiB": summary(report.prior.small)},
        "calibrated": {"ge_1MiB": summary(report.calibrated.large), "lt_1MiB": summary(report.calibrated.small)},
    }
