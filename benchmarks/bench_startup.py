"""Benchmark: how fast the CLI and the package start.

Run: python benchmarks/bench_startup.py [--runs 5] [--predict]

Times, best of --runs, each in a fresh interpreter (wall time of the whole process, as a user waits):
`python -c "import typer"` (the floor: the CLI framework alone), `clustersim --help` (run as
`python -m simulator.cli.app --help`, what the console script does), `clustersim predict --help` and
`python -c "import simulator"`; with --predict also a plain `clustersim predict` (the embedded scenario,
simulation included). Prints each time and the ratio of `--help` to `import typer`. Targets: the ratio at
most 2, `import simulator` under 0.5 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELP_RATIO_TARGET = 2.0
IMPORT_TARGET_S = 0.5


def best_of(args: list[str], runs: int) -> float:
    """The shortest wall time of `runs` runs of `args` (a fresh process each), in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command; the best is kept.")
    parser.add_argument("--predict", action="store_true", help="Also time a plain `clustersim predict`.")
    args = parser.parse_args()
    python = sys.executable
    cases = {
        "python -c 'import typer'": [python, "-c", "import typer"],
        "clustersim --help": [python, "-m", "simulator.cli.app", "--help"],
        "clustersim predict --help": [python, "-m", "simulator.cli.app", "predict", "--help"],
        "python -c 'import simulator'": [python, "-c", "import simulator"],
    }
    if args.predict:
        cases["clustersim predict"] = [python, "-m", "simulator.cli.app", "predict"]
    seconds = {name: best_of(command, args.runs) for name, command in cases.items()}
    for name, value in seconds.items():
        print(f"{name:32s} {value:7.3f} s")
    ratio = seconds["clustersim --help"] / seconds["python -c 'import typer'"]
    print(f"--help / import typer: {ratio:.2f}x (target <= {HELP_RATIO_TARGET:g}x): "
          f"{'ok' if ratio <= HELP_RATIO_TARGET else 'over'}")
    imported = seconds["python -c 'import simulator'"]
    print(f"import simulator: {imported:.3f} s (target < {IMPORT_TARGET_S:g} s): "
          f"{'ok' if imported < IMPORT_TARGET_S else 'over'}")


if __name__ == "__main__":
    main()
