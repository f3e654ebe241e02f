"""What nccl-tests' timing loop adds to a collective: the host that issues it.

nccl-tests times `iters` collectives issued back to back and prints the mean. A thread of the test drives
`-g` GPUs (`nGpus` in the log's header line `# nThread 1 nGpus 8 ...`): each iteration it enqueues the
collective on each of its GPUs in turn, inside one NCCL group, and each enqueue ends in a kernel launch
on that GPU. The GPUs cannot finish an iteration before its last launch, so once the device time is
shorter than the host's, the loop runs at the host's pace:

    time per iteration = max(device time, gpus_per_thread x HOST_ISSUE_S_PER_GPU)

With one GPU per process (nccl-tests built with MPI=1, the launch NCCL's maintainers recommend) the
host's few microseconds hide behind the device's time at every size; with `-g 8` they set a floor of
~40 us, which every small size of such a log shows.

HOST_ISSUE_S_PER_GPU = 5 us: NVIDIA/nccl-tests issue #333 (2025-07): all_reduce on B200 with NCCL 2.27's
symmetric-memory kernels from one process takes ~9 us at `-g 2` and ~22 us at `-g 4` (4.5 and 5.5 us
per GPU), where NCCL's 2.27 release blog quotes ~6.3 us for those kernels with one GPU per process (32
GPUs of one NVLink domain); NCCL's maintainer puts the difference on the CUDA launch overheads of
single-process runs. Training
frameworks drive one GPU per process, so only measured nccl-tests tables (and `clustersim collective
--gpus-per-thread`) carry this floor.
"""

from __future__ import annotations

from simulator.core.errors import ConfigError

HOST_ISSUE_S_PER_GPU = 5.0e-6


def host_issue_s(gpus_per_thread: int) -> float:
    """Seconds one test thread spends issuing one iteration's collective on all of its GPUs."""
    if gpus_per_thread < 1:
        raise ConfigError(f"GPUs per thread must be >= 1 (nccl-tests -g), got {gpus_per_thread}")
    return gpus_per_thread * HOST_ISSUE_S_PER_GPU


def timed_loop_s(device_time_s: float, gpus_per_thread: int) -> float:
    """Time nccl-tests prints for one collective whose device time is `device_time_s`: the loop runs at
    the slower of the devices and the issuing host."""
    return max(device_time_s, host_issue_s(gpus_per_thread))
