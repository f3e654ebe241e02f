"""Benchmark: calibrate on every shared nccl-tests log, the ABCI cross-validation, and the ABCI scale check.

Run: python benchmarks/bench_calibration.py [MANIFEST]
(default ../shared/data/nccl-tests/manifest.yaml beside the checkout). Fits price NCCL's choices, as
`clustersim calibrate` does by default. Prints the wall time of a fit over all logs (target: < 60 s on 2
cores), in-sample error before/after, the ABCI "fit on <= 2 nodes, predict 4 and 8" figures, and the
series' 8-32-node runs (benchmarks/data/abci_scale) predicted from its runs of at most 4 nodes (target:
<= 12% median at sizes >= 1 MiB and < 1 MiB).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

from simulator.calibration.crossval import crossval
from simulator.calibration.fit import FIT_SELECTION, fit_hardware, group_by_hardware, with_selection
from simulator.cli.measured import load_measured
from simulator.collectives.params import prior_params
from simulator.validation.accuracy import ValidationReport
from simulator.validation.run import predict_log

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nccl-tests" / "manifest.yaml"
LARGER = Path(__file__).resolve().parent / "data" / "abci_scale" / "manifest.yaml"


def _fmt(report: ValidationReport) -> str:
    return f"{report.large.median_abs_pct_error:.1f}% / {report.small.median_abs_pct_error:.1f}%"


def main() -> None:
    warnings.simplefilter("ignore")
    manifest = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    logs = with_selection(load_measured(manifest).logs, FIT_SELECTION)
    start = time.perf_counter()
    groups = group_by_hardware(logs)
    sections = {key: fit_hardware(key, members) for key, members in groups.items()}
    elapsed = time.perf_counter() - start
    prior = ValidationReport(tuple(predict_log(log) for log in logs))
    section_of = {log.file: sections[key] for key, members in groups.items() for log in members}
    fitted = [predict_log(log, section_of[log.file].apply(prior_params(log.view))) for log in logs]
    print(f"fit over {len(logs)} logs, {len(sections)} hardware groups: {elapsed:.1f} s")
    print(f"in-sample median |error| (>= 1 MiB / < 1 MiB): prior {_fmt(prior)}, "
          f"calibrated {_fmt(ValidationReport(tuple(fitted)))}")
    abci = [log for log in logs if "abci" in log.file]
    report = crossval(abci, "nodes", train_max_nodes=2)
    for held in report.held_out:
        prior_one, calibrated_one = ValidationReport((held.prior,)), ValidationReport((held.calibrated,))
        print(f"ABCI fit <= 2 nodes -> {held.prior.file}: prior {_fmt(prior_one)}, calibrated {_fmt(calibrated_one)}")
    print(f"ABCI held-out overall: prior {_fmt(report.prior)}, calibrated {_fmt(report.calibrated)}")
    larger = with_selection(load_measured(LARGER).logs, FIT_SELECTION)
    small = [log for log in abci if log.entry.nodes <= 4]
    fit_of = {(key.gpu, key.intra_node): fit_hardware(key, members)
              for key, members in group_by_hardware(small).items() if key.transport is not None}
    predicted = [predict_log(log, fit_of[log.entry.gpu, log.entry.intra_node].apply(prior_params(log.view)))
                 for log in larger]
    prior_larger = ValidationReport(tuple(predict_log(log) for log in larger))
    print(f"ABCI fit <= 4 nodes -> its 8-32-node runs: prior {_fmt(prior_larger)}, "
          f"calibrated {_fmt(ValidationReport(tuple(predicted)))}")


if __name__ == "__main__":
    main()
