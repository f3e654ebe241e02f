"""The nccl-tests text parser on small hand-written logs: layouts, noise, and bad input."""

from __future__ import annotations

import pytest

from simulator.core.errors import ConfigError, LogParseError
from simulator.measurements.nccl_tests import NcclRow, parse_log, parse_nccl_tests

HEADER = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid  100 on nodeA device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  101 on nodeB device  0 [0000:1b:00] NVIDIA H100 80GB HBM3
#
#                                            out-of-place                    in-place
#   size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
#    (B) (elements)                     (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
"""
ROW_8 = "       8        2  float    sum    -1  25.00   0.00   0.00      0  24.50   0.00   0.00      0"
ROW_16 = "      16        4  float    sum    -1  26.00   0.00   0.00      0  25.50   0.00   0.00      0"
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0012\n#\n"


def test_standard_table_rows_and_metadata() -> None:
    """A standard table: two rows at lines 10-11, ranks/hosts/devices from the device list, avg busbw."""
    log = parse_nccl_tests(HEADER + ROW_8 + "\n" + ROW_16 + "\n" + FOOTER, "t.log")
    assert log.rows == (
        NcclRow(8, 2, "float", "sum", -1, 25.0, 0.0, 0.0, 24.5, 0.0, 0.0, 10),
        NcclRow(16, 4, "float", "sum", -1, 26.0, 0.0, 0.0, 25.5, 0.0, 0.0, 11),
    )
    assert (log.nranks, log.hosts, log.devices) == (2, ("nodeA", "nodeB"), ("NVIDIA H100 80GB HBM3",))
    assert (log.avg_busbw_GBps, log.collective, log.nccl_version) == (0.0012, None, None)
    assert log.gpus_per_thread == 1


@pytest.mark.parametrize(("first_line", "gpus"), [
    ("# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1", 8),
    ("[1,0]<stdout>:# nThread 2 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor)", 4),  # launcher prefix
    ("# minBytes 8 maxBytes 16 (header line cut by its publisher)", None),
])
def test_gpus_per_thread_from_the_header_line(first_line: str, gpus: int | None) -> None:
    """`nGpus` of the `nThread T nGpus G` line is the GPUs one test thread drives (-g); no such line, None."""
    text = first_line + "\n" + HEADER.split("\n", 1)[1] + ROW_8 + "\n" + FOOTER
    assert parse_nccl_tests(text, "g.log").gpus_per_thread == gpus


@pytest.mark.parametrize(("command", "gpus"), [
    ("# command: ./build/all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50", 8),
    ("root@host:~/nccl-tests# ./build/all_gather_perf -b 8 -e 1024M -f 2 -g2", 2),  # a prompt, no space
    ("# command: mpirun -np 16 ./build/all_reduce_perf --ngpus=1 -b 8", 1),
    ("# command: mpirun -np 16 -g 4 ./build/all_reduce_perf -b 8", None),  # a launcher's flag, not the tool's
])
def test_gpus_per_thread_from_the_quoted_command_without_a_header(command: str, gpus: int | None) -> None:
    """A log whose header line was cut keeps the -g of the `*_perf` command it quotes; the header wins."""
    table = "\n".join(HEADER.split("\n")[6:]) + ROW_8 + "\n"
    assert parse_nccl_tests(command + "\n" + table, "c.log").gpus_per_thread == gpus
    header = "# nThread 1 nGpus 4 minBytes 8 maxBytes 16\n"
    assert parse_nccl_tests(command + "\n" + header + table, "c.log").gpus_per_thread == 4


def test_mpi_tag_output_prefix_and_prompt() -> None:
    """`[1,0]<stdout>:` prefixes are stripped; the prompt names the collective; not sniffed as JSON."""
    body = HEADER + ROW_8 + "\n" + FOOTER
    text = "user@login:~$ mpirun --tag-output -np 2 ./build/reduce_scatter_perf -b 8 -e 16\n"
    text += "".join(f"[1,0]<stdout>:{line}\n" for line in body.splitlines())
    log = parse_log(text, "tagged.log")
    assert log.collective == "reduce_scatter"
    assert log.rows[0] == NcclRow(8, 2, "float", "sum", -1, 25.0, 0.0, 0.0, 24.5, 0.0, 0.0, 11)


def test_nccl_info_lines_between_rows_are_skipped() -> None:
    """NCCL INFO lines (lazy connection setup) between rows are noise; both rows are kept."""
    info = "nodeA:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
    log = parse_nccl_tests(HEADER + info + "\n" + ROW_8 + "\n" + info + "\n" + ROW_16 + "\n", "info.log")
    assert [(r.size_bytes, r.line_no) for r in log.rows] == [(8, 11), (16, 13)]


def test_trailing_junk_after_the_table_is_ignored() -> None:
    """Text after the last row and no footer (shell output) is trailing junk, not an error."""
    log = parse_nccl_tests(HEADER + ROW_8 + "\nreal 0m3.2s\nJob finished\n", "tail.log")
    assert len(log.rows) == 1


def test_headerless_rows_by_column_count() -> None:
    """Without a header, 13 columns read as the standard layout and 4 as size/time/algbw/busbw."""
    standard = parse_nccl_tests(ROW_8 + "\n", "s.log")
    trimmed = parse_nccl_tests("  1_048_576   101.9   10.29   18.00\n", "t.log")
    assert standard.rows[0] == NcclRow(8, 2, "float", "sum", -1, 25.0, 0.0, 0.0, 24.5, 0.0, 0.0, 1)
    assert trimmed.rows[0] == NcclRow(
        1048576, None, None, None, None, 101.9, 10.29, 18.0, None, None, None, 1
    )


def test_ragged_spacing_and_na_values() -> None:
    """Single spaces between columns and N/A bandwidths parse; N/A becomes None."""
    text = HEADER + "8 2 float sum -1 25.0 N/A N/A N/A 24.5 0.00 0.00 N/A\n"
    row = parse_nccl_tests(text, "r.log").rows[0]
    assert (row.time_us, row.algbw_GBps, row.busbw_GBps, row.inplace_time_us) == (25.0, None, None, 24.5)


def test_truncated_row_names_its_line() -> None:
    """A row cut short (the job died mid-line) raises at that line, saying how many columns it expected."""
    text = HEADER + ROW_8 + "\n" + ROW_16[:45] + "\n"
    with pytest.raises(LogParseError) as info:
        parse_nccl_tests(text, "cut.log")
    assert (info.value.source, info.value.line_no) == ("cut.log", 11)
    assert "row has 6 columns, expected 13" in str(info.value)


def test_garbage_between_rows_names_its_line() -> None:
    """Unexplained text between two data rows raises at the garbage line, not silently skipped."""
    text = HEADER + ROW_8 + "\nthis is not a row\n" + ROW_16 + "\n"
    with pytest.raises(LogParseError) as info:
        parse_nccl_tests(text, "garbage.log")
    assert info.value.line_no == 11
    assert "'this is not a row' among the data rows" in str(info.value)


def test_garbage_instead_of_rows_names_its_line() -> None:
    """A header followed by garbage and no rows raises at the garbage line."""
    with pytest.raises(LogParseError, match="'Segmentation fault' where data rows belong") as info:
        parse_nccl_tests(HEADER + "Segmentation fault\n", "crash.log")
    assert info.value.line_no == 10


def test_misaligned_row_is_rejected() -> None:
    """A row with the right column count but a number where the type should be raises at its line."""
    text = HEADER + "8 2 12.5 sum -1 25.0 0.00 0.00 0 24.5 0.00 0.00 0\n"
    with pytest.raises(LogParseError) as info:
        parse_nccl_tests(text, "m.log")
    assert info.value.line_no == 10
    assert "type '12.5' is not a name" in str(info.value)


def test_non_numeric_time_is_rejected() -> None:
    """A time of N/A cannot be a measurement: error at the row's line."""
    text = HEADER + "8 2 float sum -1 N/A 0.00 0.00 0 24.5 0.00 0.00 0\n"
    with pytest.raises(LogParseError, match="time is N/A") as info:
        parse_nccl_tests(text, "n.log")
    assert info.value.line_no == 10


def test_empty_log_is_an_error() -> None:
    """An empty log has no data rows: LogParseError at line 1."""
    with pytest.raises(LogParseError, match="no data rows") as info:
        parse_nccl_tests("", "empty.log")
    assert info.value.line_no == 1


def test_header_without_rows_is_an_error() -> None:
    """A header and footer but no rows: the error names the last line and the header's line."""
    with pytest.raises(LogParseError, match="no data rows after the header at line 8") as info:
        parse_nccl_tests(HEADER + FOOTER, "norows.log")
    assert info.value.line_no == 12


def test_unknown_headerless_layout_is_an_error() -> None:
    """Numeric rows of an unknown width with no header cannot be read: error at the row."""
    with pytest.raises(LogParseError, match="row of 6 columns and no header line") as info:
        parse_nccl_tests("# some log\n8 2 25.0 1.0 2.0 3.0\n", "w.log")
    assert info.value.line_no == 2


def test_second_table_is_an_error() -> None:
    """Two runs concatenated in one file: the second header raises, naming the likely cause."""
    text = HEADER + ROW_8 + "\n" + FOOTER + HEADER
    with pytest.raises(LogParseError, match="2 result tables .*several independent runs.*MPI=1") as info:
        parse_nccl_tests(text, "two.log")
    assert info.value.line_no == 13 + 8


def test_rows_after_the_footer_are_an_error() -> None:
    """Rows after the footer belong to another run: error at the first such row."""
    text = HEADER + ROW_8 + "\n" + FOOTER + ROW_16 + "\n"
    with pytest.raises(LogParseError, match="2 result tables \\(from lines 8, 14\\)") as info:
        parse_nccl_tests(text, "after.log")
    assert info.value.line_no == 14


def test_run_picks_one_of_several_tables() -> None:
    """`run` takes one run's rows (1-based); a run the file does not hold is an error at line 1."""
    text = HEADER + ROW_8 + "\n" + FOOTER + HEADER + ROW_16 + "\n" + FOOTER
    assert [r.size_bytes for r in parse_nccl_tests(text, "two.log", run=1).rows] == [8]
    assert [(r.size_bytes, r.line_no) for r in parse_nccl_tests(text, "two.log", run=2).rows] == [(16, 23)]
    assert [r.size_bytes for r in parse_nccl_tests(HEADER + ROW_8, "one.log", run=1).rows] == [8]
    with pytest.raises(LogParseError, match="run 3 asked for, but the file holds 2") as info:
        parse_nccl_tests(text, "two.log", run=3)
    assert info.value.line_no == 1


def test_busbw_only_table_needs_the_factor() -> None:
    """A `size busbw` table: time = size / (busbw / factor); without the factor, an error at the row."""
    text = "#  size  busbw\n1048576  150.0\n"
    row = parse_nccl_tests(text, "b.log", busbw_factor=1.75).rows[0]
    assert row.algbw_GBps == pytest.approx(150.0 / 1.75)
    assert row.time_us == pytest.approx(1048576 / (150.0 / 1.75) / 1e3)
    with pytest.raises(LogParseError, match="only busbw is printed.*manifest") as info:
        parse_nccl_tests(text, "b.log")
    assert info.value.line_no == 2


def test_torch_bench_size_units() -> None:
    """The PyTorch table takes B/KiB/MiB/GiB sizes, and KB/MB/GB as nccl-tests' own size suffixes read them
    (1024-based: `-b 32K` is 32,768 bytes); a size in an unknown unit is refused at its line."""
    text = "| payload | busbw | algbw |\n| --: | --: | --: |\n| 32KB | 1.44GBps | 0.82GBps |\n"
    assert parse_nccl_tests(text, "torch.md").rows[0].size_bytes == 32768
    with pytest.raises(LogParseError, match="32QB") as info:
        parse_nccl_tests(text.replace("32KB", "32QB"), "torch.md")
    assert info.value.line_no == 3


def test_markdown_table_of_a_report_generator_keeps_its_times() -> None:
    """An nccl-tests table rewritten as Markdown by a report generator: header cells carry units and out/in-place
    words; the printed times are the times (not size / algbw), the second set in-place."""
    text = ("```bash\n/opt/nccl-tests/build/all_reduce_perf -b 8 -e 128M -f 2\n```\n\n"
            "| Size (B) | Out Time (us) | Out BusBW (GB/s) | In Time (us) | In BusBW (GB/s) | Wrong |\n"
            "| --- | --- | --- | --- | --- | --- |\n"
            "| 8 | 30.07 | 0.00 | 24.21 | 0.00 | 0 |\n"
            "| 1048576 | 95.5 | 19.22 | 96.1 | 19.10 | 0 |\n")
    log = parse_nccl_tests(text, "report.md")
    assert log.collective == "all_reduce"
    assert [(r.size_bytes, r.time_us, r.busbw_GBps, r.inplace_time_us) for r in log.rows] == [
        (8, 30.07, 0.0, 24.21), (1048576, 95.5, 19.22, 96.1)]
    assert log.rows[1].algbw_GBps == pytest.approx(1048576 / 95.5e3)


def test_csv_table_reads_as_the_table_it_was_saved_from() -> None:
    """An nccl-tests table saved as CSV (column names with their unit, `out_time_us`, `in_busbw`), after the
    command that ran it and an NCCL line with commas of its own: the same rows as the table, times as printed, the
    second set in-place; a line with commas before the header is not a row."""
    text = ("$ all_reduce_perf -b 8 -e 1M -f 2 -g 8\n"
            "node01:123:123 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2\n"
            "size,count,type,redop,root,out_time_us,out_algbw,out_busbw,out_wrong,in_time_us,in_algbw,in_busbw,in_wrong\n"
            "8,2,float,sum,-1,25.31,0.00,0.00,0,24.88,0.00,0.00,0\n"
            "1048576,262144,float,sum,-1,60.12,17.44,32.70,0,59.80,17.53,32.87,0\n")
    log = parse_nccl_tests(text, "run.csv")
    assert log.collective == "all_reduce"
    assert [(r.size_bytes, r.time_us, r.busbw_GBps, r.inplace_time_us) for r in log.rows] == [
        (8, 25.31, 0.0, 24.88), (1048576, 60.12, 32.70, 59.80)]
    assert log.rows[1].algbw_GBps == 17.44


INTERLEAVED = """#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong
#   (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1nid001049:658566:658566 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 0
nid001049:658566:658566 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 0 proto 0 time 20.400713
    22.18    0.00    0.00      0nid001049:658566:658566 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 0 proto 0
nid001049:658566:658566 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 0 proto 0 time 20.400713
    19.17    0.00    0.00      0
          16             4     float     sum      -1nid001049:658566:658566 [0] NCCL INFO AllReduce: 16 Bytes
    10287    0.00    0.00      0nid001049:658566:658566 [0] NCCL INFO AllReduce: 16 Bytes -> Algo 0 proto 0
    18.61    0.00    0.00      0
# Avg bus bandwidth    : 0.00
"""


def test_rows_written_in_parts_between_nccl_log_lines_are_put_back_together() -> None:
    """NCCL_DEBUG=INFO writes its lines between the parts nccl-tests writes a row in: the parts (the first columns,
    then each column set, numbers only, even a time without decimals) make one row at the line it started on."""
    rows = parse_nccl_tests(INTERLEAVED, "interleaved.log").rows
    assert [(r.size_bytes, r.time_us, r.inplace_time_us, r.line_no) for r in rows] == [
        (8, 22.18, 19.17, 3), (16, 10287.0, 18.61, 8)]


def test_a_row_part_that_never_completes_is_an_error_at_its_line() -> None:
    text = INTERLEAVED.replace("    18.61    0.00    0.00      0\n", "")
    with pytest.raises(LogParseError, match="row has 9 columns, expected 13") as info:
        parse_nccl_tests(text, "interleaved.log")
    assert info.value.line_no == 8


def test_collective_from_header_comment_when_output_does_not_say() -> None:
    """With no program output naming the tool, `# collective:` then `# command:` headers are used."""
    assert parse_nccl_tests("# collective: alltoall (8 ranks)\n" + ROW_8 + "\n").collective == "alltoall"
    assert (
        parse_nccl_tests("# command: srun ./all_gather_perf -b 8\n" + ROW_8 + "\n").collective == "all_gather"
    )
    ambiguous = "# commands: all_gather_perf ; broadcast_perf\n" + ROW_8 + "\n"
    assert parse_nccl_tests(ambiguous).collective is None


def test_sniffing_json_and_unknown_format() -> None:
    """parse_log sends `{`/`[{` to the JSON parser and rejects unknown format names."""
    with pytest.raises(LogParseError, match="invalid JSON") as info:
        parse_log('{"results": [', "j.json")
    assert info.value.line_no == 1
    with pytest.raises(ConfigError, match="unknown log format 'xlsx'"):
        parse_log(ROW_8, "x.log", "xlsx")


def test_terminal_colour_codes_are_stripped() -> None:
    """A log captured with its terminal's colour codes (ANSI CSI sequences around each line) reads as the bare log."""
    body = HEADER + ROW_8 + "\n" + ROW_16 + "\n" + FOOTER
    coloured = "".join(f"\x1b[1;32m{line}\x1b[0m\n" for line in body.splitlines())
    assert parse_nccl_tests(coloured, "colour.log").rows == parse_nccl_tests(body, "bare.log").rows


def test_open_mpi_tags_inside_a_row_are_stripped() -> None:
    """Open MPI's --tag-output tags each write; nccl-tests 2.13+ writes a row in parts (sizes and reduction, then
    each column group), so a published row can carry a tag before each part. It reads as the bare row."""
    tag = "[1,0]<stdout>:"
    cuts = [(row.index("-1") + 2, row.index("0.00      0") + 11) for row in (ROW_8, ROW_16)]  # nccl-tests' writes
    split = [f"{tag}{row[:a]}{tag}{row[a:b]}{tag}{row[b:]}" for row, (a, b) in zip((ROW_8, ROW_16), cuts, strict=True)]
    assert all(line.count(tag) == 3 for line in split)
    body = "".join(f"{tag}{line}\n" for line in HEADER.splitlines()) + "\n".join(split) + "\n"
    log = parse_nccl_tests(body + "".join(f"{tag}{line}\n" for line in FOOTER.splitlines()), "split.log")
    bare = parse_nccl_tests(HEADER + ROW_8 + "\n" + ROW_16 + "\n" + FOOTER, "bare.log")
    assert log.rows == bare.rows
    assert [r.time_us for r in log.rows] == [25.0, 26.0]


@pytest.mark.parametrize("prefix", ["0: ", "12: ", "x3005c0s13b0n0: ", "node-01.cluster: ", "10.0.1.2: ", "[0] ",
                                    "[3]   ", "[default0]:", "[rank1]:", "[1,0]<stdout>: ",
                                    # kubectl logs --prefix (an MPI operator's launcher pod)
                                    "[pod/nccl-tests-launcher-x7k2q/mpi-launcher] ",
                                    "[pod/launcher/mpi] 2024-05-22T07:36:17.5Z ",
                                    # a log collector's time stamp, alone or before the launcher's label
                                    "2024-05-22T07:36:17.123456789Z ", "2024-05-22 07:36:17,123 ",
                                    "[2024-05-22 07:36:17] ", "Wed May 22 07:36:17 2024: ", "07:36:17.5 ",
                                    "2024-05-22T07:36:17Z node01: ", "[07:36:17] 0: ",
                                    # a Markdown quote (a log quoted in an issue comment), once or twice
                                    "> ", "> > "])
def test_launcher_and_host_labels_are_stripped(prefix: str) -> None:
    """Every line labelled by its launcher (srun --label, pdsh / clush / Cray PALS host labels, MPICH and Intel MPI
    rank labels, torchrun --tee, kubectl logs --prefix) reads as the bare log; a host label needs the space after
    its colon, so an NCCL INFO line's host:pid:tid is noise, not a label; a labelled shell warning between rows is
    noise too."""
    info = "x3005c0s13b0n0:12345:12400 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC"
    warning = "Warning: Permanently added 'node02' (ED25519) to the list of known hosts."
    body = HEADER + ROW_8 + "\n" + info + "\n" + warning + "\n" + ROW_16 + "\n" + FOOTER
    log = parse_nccl_tests("".join(f"{prefix}{line}\n" for line in body.splitlines()), "labelled.log")
    bare = parse_nccl_tests(body, "bare.log")
    assert [(r.size_bytes, r.time_us) for r in log.rows] == [(r.size_bytes, r.time_us) for r in bare.rows]
    assert (log.nranks, log.collective) == (bare.nranks, bare.collective)
