"""Error of predictions against measured nccl-tests rows: per row, per log, overall.

Definitions (DESIGN.md section 10): error is on time, |pred - meas| / meas, per row; a log and the
whole set are summarised by the median and the 90th percentile, separately for sizes >= 1 MiB
(bandwidth regime) and < 1 MiB (latency regime). Rows of size 0 move no data and are left out.
The measured time is the out-of-place column (the one every layout has).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.core.units import MIB
from simulator.measurements.load import SkippedEntry


@dataclass(frozen=True)
class RowError:
    size_bytes: int
    measured_time_us: float
    predicted_time_us: float
    algo: str
    proto: str

    @property
    def abs_pct_error(self) -> float:
        return abs(self.predicted_time_us - self.measured_time_us) / self.measured_time_us * 100.0


@dataclass(frozen=True)
class ErrorSummary:
    """Median and p90 of |error| in percent (None when there are no rows)."""

    points: int
    median_abs_pct_error: float | None
    p90_abs_pct_error: float | None


def summarize(errors: Sequence[float]) -> ErrorSummary:
    if not errors:
        return ErrorSummary(0, None, None)
    arr = np.asarray(errors, dtype=float)
    return ErrorSummary(len(arr), float(np.median(arr)), float(np.percentile(arr, 90)))


@dataclass(frozen=True)
class LogReport:
    file: str
    collective: str
    rows: tuple[RowError, ...]

    @property
    def overall(self) -> ErrorSummary:
        return summarize([r.abs_pct_error for r in self.rows])

    @property
    def large(self) -> ErrorSummary:
        return summarize([r.abs_pct_error for r in self.rows if r.size_bytes >= MIB])

    @property
    def small(self) -> ErrorSummary:
        return summarize([r.abs_pct_error for r in self.rows if r.size_bytes < MIB])


@dataclass(frozen=True)
class ValidationReport:
    logs: tuple[LogReport, ...]
    skipped: tuple[SkippedEntry, ...] = ()  # manifest entries not used, with why

    def _all(self, keep: str) -> list[float]:
        out = []
        for log in self.logs:
            for r in log.rows:
                if keep == "all" or (keep == "large") == (r.size_bytes >= MIB):
                    out.append(r.abs_pct_error)
        return out

    @property
    def overall(self) -> ErrorSummary:
        return summarize(self._all("all"))

    @property
    def large(self) -> ErrorSummary:
        return summarize(self._all("large"))

    @property
    def small(self) -> ErrorSummary:
        return summarize(self._all("small"))


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def report_to_json(report: ValidationReport) -> dict[str, object]:
    """The `validate --json` contract (DESIGN.md section 11), plus split summaries."""
    logs = []
    for log in report.logs:
        logs.append({
            "file": log.file,
            "collective": log.collective,
            "points": log.overall.points,
            "median_abs_pct_error": _rounded(log.overall.median_abs_pct_error),
            "p90_abs_pct_error": _rounded(log.overall.p90_abs_pct_error),
            "median_abs_pct_error_ge_1MiB": _rounded(log.large.median_abs_pct_error),
            "median_abs_pct_error_lt_1MiB": _rounded(log.small.median_abs_pct_error),
            "rows": [
                {"size_bytes": r.size_bytes, "measured_time_us": r.measured_time_us,
                 "predicted_time_us": round(r.predicted_time_us, 3), "algo": r.algo, "proto": r.proto}
                for r in log.rows
            ],
        })
    return {
        "logs": logs,
        "skipped": [{"file": s.file, "reason": s.reason} for s in report.skipped],
        "points": report.overall.points,
        "median_abs_pct_error": _rounded(report.overall.median_abs_pct_error),
        "p90_abs_pct_error": _rounded(report.overall.p90_abs_pct_error),
        "median_abs_pct_error_ge_1MiB": _rounded(report.large.median_abs_pct_error),
        "p90_abs_pct_error_ge_1MiB": _rounded(report.large.p90_abs_pct_error),
        "median_abs_pct_error_lt_1MiB": _rounded(report.small.median_abs_pct_error),
        "p90_abs_pct_error_lt_1MiB": _rounded(report.small.p90_abs_pct_error),
    }
