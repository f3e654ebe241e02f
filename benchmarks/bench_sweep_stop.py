"""Benchmark: how fast a running sweep stops, against its bars (SIGINT: exit 130 within 5 s; a second SIGINT
right after the first: gone within 2 s; no process of it left either way).

Run: python benchmarks/bench_sweep_stop.py [SWEEP.yaml] [--workers N]
Default: examples/sweep-capacity.yaml (1,008 scenarios, minutes). Each case starts the sweep in a session of its
own, waits for its first row, signals it, and times the exit; then counts what is left of its process group.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARS_S = {1: 5.0, 2: 2.0}  # signals sent -> the bar on the time to exit


def _group(pgid: int) -> int:
    """Live processes of the process group, from /proc."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += int(fields[2]) == pgid and fields[0] != "Z"
    return count


def _case(sweep: Path, workers: int, signals: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "results.csv"
        proc = subprocess.Popen([sys.executable, "-m", "simulator.cli.app", "sweep", str(sweep), "-o", str(out),
                                 "--workers", str(workers)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        while not (out.exists() and out.read_text().count("\n") > 1):
            if proc.poll() is not None:
                raise SystemExit(f"the sweep ended before its first row (exit code {proc.returncode})")
            time.sleep(0.05)
        processes = _group(proc.pid)
        start = time.perf_counter()
        for _ in range(signals):
            proc.send_signal(signal.SIGINT)
        proc.wait()
        took = time.perf_counter() - start
        time.sleep(0.5)  # the resource tracker leaves once the sweep's pipe closes
        left = _group(proc.pid)
        verdict = "ok" if proc.returncode == 130 and took <= BARS_S[signals] and not left else "FAILS THE BAR"
        print(f"{signals} x SIGINT: exit {proc.returncode} in {took:.2f} s (bar {BARS_S[signals]:.0f} s); "
              f"{processes} processes running, {left} left after: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", type=Path, default=ROOT / "examples" / "sweep-capacity.yaml")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    for signals in BARS_S:
        _case(args.sweep, args.workers, signals)


if __name__ == "__main__":
    main()
