"""The nccl-tests logs of sources outside the validation set (benchmarks/data/outside_nccl_tests): every file
parses as published, with hand-counted rows, names its source, and shares no source and no row with the
validation logs in ../shared/data/nccl-tests, so that `validate` on them is an out-of-sample error.

Row counts were taken independently of the parser: lines that, once launcher tags (`0: `, `[1,0]<stdout>:`, also
inside a line) are removed, start with a size, a count and an element type
(`grep -cE '^\\s*[0-9]+\\s+[0-9]+\\s+(float|...)'`), less the rows of size 0, which move no data; in a
Markdown table, the lines starting `| <digits>`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simulator.measurements.load import read_measured

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = REPO / "benchmarks" / "data" / "outside_nccl_tests"
SHARED = REPO.parent / "shared" / "data" / "nccl-tests"

EXPECTED_ROWS = {
    "a100x4-128node-allgather-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 18,
    "a100x4-256node-allgather-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 17,
    "a100x4-256node-allgather-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 17,
    "a100x4-256node-allreduce-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 29,
    "a100x4-256node-allreduce-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 29,
    "a100x4-256node-alltoall-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 19,
    "a100x4-256node-alltoall-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 19,
    "a100x4-2node-allgather-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 24,
    "a100x4-2node-allgather-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 24,
    "a100x4-2node-allgather-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 24,
    "a100x4-2node-allgather-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 24,
    "a100x4-2node-allgather-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 24,
    "a100x4-2node-allreduce-perlmutter-slingshot-host-nersc-repo.txt": 30,
    "a100x4-2node-allreduce-perlmutter-slingshot-nogdr-dingp-report.txt": 25,  # Markdown: lines starting '| <digits>'
    "a100x4-2node-allreduce-perlmutter-slingshot-shifter-nersc-repo.txt": 30,
    "a100x4-2node-allreduce-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 29,
    "a100x4-2node-allreduce-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 29,
    "a100x4-2node-allreduce-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 29,
    "a100x4-2node-allreduce-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 29,
    "a100x4-2node-allreduce-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 29,
    "a100x4-2node-alltoall-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 26,
    "a100x4-2node-alltoall-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 26,
    "a100x4-2node-alltoall-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 26,
    "a100x4-2node-alltoall-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 26,
    "a100x4-2node-alltoall-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 26,
    "a100x4-540node-allgather-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 15,
    "a100x4-540node-allgather-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 15,
    "a100x4-540node-allreduce-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 29,
    "a100x4-540node-allreduce-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 29,
    "a100x4-540node-alltoall-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 17,
    "a100x4-540node-alltoall-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 17,
    "a100x4-8node-allgather-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 22,
    "a100x4-8node-allgather-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 22,
    "a100x4-8node-allgather-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 22,
    "a100x4-8node-allgather-polaris-slingshot-nccl221-setup3-alcf-repo.txt": 22,
    "a100x4-8node-allgather-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 22,
    "a100x4-8node-allgather-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 22,
    "a100x4-8node-allreduce-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 29,
    "a100x4-8node-allreduce-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 29,
    "a100x4-8node-allreduce-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 29,
    "a100x4-8node-allreduce-polaris-slingshot-nccl221-setup3-alcf-repo.txt": 29,
    "a100x4-8node-allreduce-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 29,
    "a100x4-8node-allreduce-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 29,
    "a100x4-8node-alltoall-polaris-slingshot-nccl218-setup3-alcf-repo.txt": 24,
    "a100x4-8node-alltoall-polaris-slingshot-nccl218-setup4-alcf-repo.txt": 24,
    "a100x4-8node-alltoall-polaris-slingshot-nccl218-setup5-alcf-repo.txt": 24,
    "a100x4-8node-alltoall-polaris-slingshot-nccl221-setup3-alcf-repo.txt": 24,
    "a100x4-8node-alltoall-polaris-slingshot-nccl221-setup4-alcf-repo.txt": 24,
    "a100x4-8node-alltoall-polaris-slingshot-nccl221-setup5-alcf-repo.txt": 24,
    "a100x8-2node-allreduce-awsp4d-efa-eks-awssamples-page.txt": 30,
    "a100x8-2node-allreduce-azure-ndmv4-aks-jingchaozhang-page.txt": 31,
    "a100x8-2node-allreduce-dgxa100-hdr-k8s-deepops-repo.txt": 30,
    "a100x8-2node-allreduce-oci-roce-oke-quickstart-page.txt": 31,
    "a100x8-4node-allreduce-dgxa100-ib-slurm-deepops-repo.txt": 13,
    "gb200x4-2node-nvl72-1rack-allreduce-ocioke-repo.txt": 33,
    "gh200x1-2node-allreduce-alps-slingshot-sarussuite-cscsdocs-page.txt": 8,
    "gh200x4-2node-allreduce-alps-santis-slingshot-crayns-repo.txt": 25,
    "gh200x4-2node-allreduce-alps-slingshot-cscsdocs-page.txt": 25,
    "gh200x4-2node-allreduce-olivia-slingshot-sigma2docs-page.txt": 28,  # int8 rows from 1 B
    "h100x4-1node-allreduce-lambda-4xh100-dudeperf3ct-page.txt": 28,
    "h100x4-2node-allreduce-ring-nccltests252-ghissue.txt": 5,
    "h100x8-2node-allgather-gcpa3high-tcpx-clustertoolkit-repo.txt": 10,
    "h100x8-2node-allgather-gcpa3mega-tcpxo-aimldl-repo.txt": 11,
    "h100x8-2node-allgather-gcpa3mega-tcpxo-gke-clustertoolkit-hpc.txt": 26,  # 31, of which 5 of size 0 (left out)
    "h100x8-2node-allreduce-awsp5-efa-notuner-keitaw-notes.txt": 32,  # rows split by Open MPI's tags mid-line
    "h100x8-2node-allreduce-awsp5-efa-tuner-keitaw-notes.txt": 32,
    "h200x8-2node-allgather-gcpa3ultra-roce-clustertoolkit-repo.txt": 24,
    "v100x8-2node-allreduce-dgx1-roce-k8s-deepops-repo.txt": 29,
    "a100x8-2node-allreduce-awsp4d-efa-eks-nccl283-awssamples-page.txt": 28,
    "h200x8-2node-allgather-gcpa3ultra-roce-gke-skypilot-repo.txt": 24,
    "h200x8-2node-allreduce-dellxe9680-spectrumx-roce-openshift-repo.txt": 25,
    "rtxpro6000x1-2node-allreduce-awsg7e-efa-slurm-parallelcluster-repo.txt": 28,
    "gb300x4-32node-nvl72-2rack-allreduce-roce-oci-quickstart-repo.txt": 2,
    "gb300x4-32node-nvl72-2rack-alltoall-roce-oci-quickstart-repo.txt": 2,
    "h100x1-2node-sendrecv-roce400-1nic-nogdr-moc-repo.txt": 13,
    "h100x8-2node-allreduce-crusoe-ib-nvlstree-rgee18-nccltests294.txt": 5,
    "h100x8-2node-allreduce-together-k8s-ib-skypilot-repo.txt": 5,
    "h200x8-2node-allreduce-oci-roce-ocihpc-superant-page.txt": 5,
    "rtx2080tix4-8node-allreduce-ib100-nogdr-dexhunter-repo.txt": 28,
}


def _entries() -> list[dict]:
    return yaml.safe_load((OUTSIDE / "manifest.yaml").read_text())


def _source(path: Path) -> str:
    line = next(line for line in path.read_text().splitlines() if line.startswith("# source:"))
    return line.removeprefix("# source:").strip()


def _document(source: str) -> str:
    """The published document a source line names: owner/name and path of a github.com file (any commit), the
    page's address, or, for a source described without one, the first title it quotes (else the whole line)."""
    found = re.search(r"github\.com/([\w.-]+/[\w.-]+)/(?:blob|tree)/[^/\s]+/(\S+)", source)
    if found:
        return f"{found.group(1)}/{found.group(2)}".lower()
    if re.match(r"https?://", source):
        return source.split()[0].lower()
    quoted = re.search(r'"([^"]+)"', source)
    return (quoted.group(1) if quoted else source).lower()


def test_every_log_parses_with_its_hand_counted_rows():
    loaded = read_measured(OUTSIDE / "manifest.yaml", None, lambda message: None, strict=True)
    logs = loaded.logs
    assert not loaded.skipped
    assert {log.entry.file: len(log.rows) for log in logs} == EXPECTED_ROWS
    assert {entry["file"] for entry in _entries()} == {path.name for path in OUTSIDE.glob("*.txt")}


def test_every_log_names_its_source_and_hardware():
    for path in OUTSIDE.glob("*.txt"):
        header = [line for line in path.read_text().splitlines() if line.startswith("# ")]
        for field in ("# source:", "# GPU:", "# nodes:", "# NCCL version:"):
            assert any(line.startswith(field) for line in header), f"{path.name}: no '{field}' line"


@pytest.mark.skipif(not (SHARED / "manifest.yaml").is_file(), reason=f"shared measured data not present at {SHARED}")
def test_no_source_or_row_is_shared_with_the_validation_logs():
    """Other sources: no document (file or page) of the validation logs, and at most one (size, time) row in common
    with them (one coincidence: 4 KiB in 55.59 us on an H200 all_gather and an A100 all_reduce). Three
    logs come from other documents of a repository that published one validation log (Google's cluster-toolkit:
    A3 High, A3 Mega and A3 Ultra against the validation's A4)."""
    shared_documents = {_document(_source(path)) for path in SHARED.glob("*.txt")}
    for path in OUTSIDE.glob("*.txt"):
        assert _document(_source(path)) not in shared_documents, path.name
    shared = read_measured(SHARED / "manifest.yaml", None, lambda message: None).logs
    shared_rows = {(row.size_bytes, row.time_us) for log in shared for row in log.rows}
    for log in read_measured(OUTSIDE / "manifest.yaml", None, lambda message: None).logs:
        assert len({(row.size_bytes, row.time_us) for row in log.rows} & shared_rows) <= 1, log.entry.file
