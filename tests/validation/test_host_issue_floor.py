"""nccl-tests' loop with one thread driving several GPUs (-g): the host's launches set a floor on time.

Hand values: 5 us a GPU (nccl-tests #333: ~9 us at -g 2, ~22 us at -g 4 on B200), so -g 8 prints no size
below 40 us; a log run with one GPU per process is priced exactly as the collective model prices it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.harness import HOST_ISSUE_S_PER_GPU, host_issue_s, timed_loop_s
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from simulator.measurements.dataset import measured_log, parse_entry_log
from simulator.measurements.manifest import ManifestEntry
from simulator.validation.run import predict_log

TABLE = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
           8             2     float     sum      -1    34.50    0.00    0.00      0    34.40    0.00    0.00      0
        4096          1024     float     sum      -1    34.70    0.12    0.21      0    34.60    0.12    0.21      0
   268435456      67108864     float     sum      -1   1500.0  178.96  313.18      0   1500.0  178.96  313.18      0
"""


def header(gpus: int) -> str:
    return f"# nThread 1 nGpus {gpus} minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20\n"


def entry(gpus_per_thread: int | None = None) -> ManifestEntry:
    return ManifestEntry(file="a100.txt", collective="all_reduce", gpu="A100-SXM4-40GB", gpus_per_node=8, nodes=1,
                         intra_node="nvswitch-nvlink3", gpus_per_thread=gpus_per_thread)


def predicted_us(text: str, e: ManifestEntry | None = None) -> list[float]:
    e = e or entry()
    return [row.predicted_time_us for row in predict_log(measured_log(e, parse_entry_log(e, text, e.file))).rows]


def test_hand_values() -> None:
    """8 GPUs from one thread: 40 us an iteration; a 10 us collective prints 40 us, a 100 us one 100 us."""
    assert pytest.approx(5e-6) == HOST_ISSUE_S_PER_GPU
    assert host_issue_s(8) == pytest.approx(40e-6)
    assert timed_loop_s(10e-6, 8) == pytest.approx(40e-6)
    assert timed_loop_s(100e-6, 8) == pytest.approx(100e-6)
    assert timed_loop_s(10e-6, 1) == pytest.approx(10e-6)


def test_no_gpus_is_an_error() -> None:
    with pytest.raises(ConfigError, match="-g"):
        host_issue_s(0)


@given(device_s=st.floats(min_value=0.0, max_value=1.0), gpus=st.integers(min_value=1, max_value=64))
def test_the_loop_is_never_faster_than_device_or_host(device_s: float, gpus: int) -> None:
    """timed >= device time and >= the host's issue time, equal to the device time once it is the longer,
    and never smaller for more GPUs a thread."""
    timed = timed_loop_s(device_s, gpus)
    assert timed >= device_s and timed >= host_issue_s(gpus)
    if device_s >= host_issue_s(gpus):
        assert timed == device_s
    assert timed_loop_s(device_s, gpus + 1) >= timed


def test_one_gpu_per_process_is_the_collective_model_alone() -> None:
    """A log whose header says nGpus 1 (MPI, one process a GPU) is priced as the collective model prices it."""
    e = entry()
    measured = measured_log(e, parse_entry_log(e, header(1) + TABLE, e.file))
    model_us = [predict_collective(measured.view, "all_reduce", row.size_bytes).time_s * 1e6 for row in measured.rows]
    assert predicted_us(header(1) + TABLE) == pytest.approx(model_us)


def test_eight_gpus_a_thread_floor_small_sizes_only() -> None:
    """nGpus 8: the 8 B and 4 KiB rows take the 40 us of eight launches; 256 MiB, far longer, is unchanged."""
    one, eight = predicted_us(header(1) + TABLE), predicted_us(header(8) + TABLE)
    assert one[0] < 40.0 and one[1] < 40.0  # the collective alone is faster than the host here
    assert eight[:2] == pytest.approx([40.0, 40.0])
    assert eight[2] == pytest.approx(one[2]) and one[2] > 40.0


def test_the_manifest_states_it_for_a_log_without_its_header() -> None:
    """A log published without its header line takes the entry's gpus_per_thread; with neither, 1."""
    assert predicted_us(TABLE, entry(gpus_per_thread=8))[:2] == pytest.approx([40.0, 40.0])
    assert predicted_us(TABLE) == pytest.approx(predicted_us(header(1) + TABLE))


def test_manifest_and_header_that_disagree_are_an_error() -> None:
    e = entry(gpus_per_thread=2)
    with pytest.raises(ConfigError, match="nGpus 8.*gpus_per_thread 2"):
        measured_log(e, parse_entry_log(e, header(8) + TABLE, e.file))


def test_collective_command_prices_the_loop_like_nccl_tests_g() -> None:
    """`clustersim collective -g 8`: every row at least 40 us; rows slower than that as with -g 1."""
    def rows(*extra: str) -> list[dict]:
        out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "collective", "--topology", "dgx-a100",
                              "-e", "64M", "--json", *extra], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        payload = json.loads(out.stdout)
        return payload["rows"]

    alone, looped = rows(), rows("-g", "8")
    assert min(r["time_us"] for r in looped) == pytest.approx(40.0)
    for a, g in zip(alone, looped, strict=True):
        assert g["time_us"] == pytest.approx(max(a["time_us"], 40.0), abs=1e-3)


@given(gpus=st.integers(min_value=1, max_value=64))
def test_the_header_line_gpus_are_read_and_never_make_a_row_faster(gpus: int) -> None:
    """Any nGpus in the header is read back, and a row's prediction is never below that with one GPU a
    thread, nor below gpus x 5 us."""
    e = entry()
    measured = measured_log(e, parse_entry_log(e, header(gpus) + TABLE, e.file))
    assert measured.gpus_per_thread == gpus
    rows = predicted_us(header(gpus) + TABLE)
    for row, alone in zip(rows, predicted_us(header(1) + TABLE), strict=True):
        assert row >= alone and row >= gpus * 5.0 - 1e-9
