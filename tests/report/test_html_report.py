"""`predict --report` / `scale --report`: a self-contained HTML page that renders offline.

The rendering test runs a headless Chromium on the page with name resolution disabled (offline) and
reads its console log from stderr; it is skipped where no Chromium is installed (CI installs
Debian's `chromium`, see .ci/run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from simulator.report import figures
from simulator.report.html import scale_report_html, step_report_html
from simulator.scenario import DEFAULT_SCENARIO, resolve_scenario
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from simulator.training.timeline import Span

STEP_DIVS = ("timeline", "time-breakdown", "memory", "utilisation")
SCALE_DIVS = ("scaling-efficiency", "throughput")
# One console message of the page, as Chromium logs it with --enable-logging=stderr:
# "[pid:tid:date/time:INFO:CONSOLE(12)] "text", source: file:///... (12)" (older builds) or
# "[pid:tid:date/time:INFO:CONSOLE:12] "text", source: ..." (newer ones).
CONSOLE_LINE = re.compile(r"^\[[^\]]*:(?P<level>[A-Z]+):CONSOLE[^\]]*\]\s*(?P<message>.*)$")


@pytest.fixture(scope="module")
def prediction() -> StepPrediction:
    topology, training, model = resolve_scenario(DEFAULT_SCENARIO)
    return predict_step(topology, training, model)


def _scale_rows(p: StepPrediction) -> list[tuple[int, StepPrediction]]:
    """Two rows: the second has twice the GPUs and tokens but a step 1/0.9 as long, so 90.0% efficiency."""
    return [(1, p), (2, replace(p, n_gpus=2 * p.n_gpus, tokens_per_step=2 * p.tokens_per_step,
                                step_time_s=p.step_time_s / 0.9))]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_step_page_is_self_contained(prediction):
    """No external script or stylesheet; plotly.js inline exactly once; every figure's div; the
    header's metric values as the CLI table prints them."""
    page = step_report_html("llama2-7b on 4 nodes", prediction)
    assert '<script src="http' not in page and 'src="http' not in page and '<link rel="stylesheet"' not in page
    assert get_plotlyjs() in page and page.count("* plotly.js v") == 1  # the whole bundle, once
    for div in STEP_DIVS:
        assert f'id="{div}"' in page
    p = prediction
    for value in (f"{p.step_time_s:.3f} s", f"{p.tokens_per_s:,.0f}", f"{100 * p.mfu:.1f}%",
                  f"{100 * p.gpu_idle_fraction:.1f}%", f"{p.exposed_comm_s:.3f} s", "fits"):
        assert value in page
    assert "averaged over all the job&#x27;s GPUs" in page and "one representative GPU" in page


def test_out_of_memory_is_red(prediction):
    """A total above capacity: the verdict says OUT OF MEMORY in a red card, and the capacity line
    and the memory figure's title are red."""
    oom = replace(prediction, memory_capacity_bytes=prediction.memory.total_bytes / 2)
    page = step_report_html("oom", oom)
    assert '<div class="metric oom"><div class="value">OUT OF MEMORY</div>' in page
    fig = figures.memory_figure(oom)
    assert fig.layout.shapes[0].line.color == figures.OOM_COLOUR
    assert fig.layout.title.font.color == figures.OOM_COLOUR and "OUT OF MEMORY" in fig.layout.title.text


def test_title_is_escaped(prediction):
    """A title with markup is shown as text, not interpreted."""
    page = step_report_html("<script>alert(1)</script>", prediction)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_stream_utilisation_by_hand():
    """Step of 1 s in 4 bins: compute busy 0-0.5 s fills bins 1-2; the all-gather stream 0.25-0.75 s
    fills bins 2-3; a reduction 0.1-0.2 s is 0.1/0.25 = 40% of bin 1."""
    spans = (Span("c", "compute", "forward", 0.0, 0.5), Span("g", "ag", "all_gather", 0.25, 0.75, 10),
             Span("r", "rs", "reduce_scatter", 0.1, 0.2, 10))
    streams, edges, busy = figures.stream_utilisation(spans, 1.0, bins=4)
    assert streams == ["compute", "ag", "rs"]
    assert edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert busy == pytest.approx(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0.4, 0, 0, 0]]))


def test_timeline_has_one_bar_per_span_on_its_stream(prediction):
    """Every span is one bar, on its stream's row, coloured by its label, starting where it started."""
    fig = figures.timeline_figure(prediction)
    tasks = [trace for trace in fig.data if trace.name != figures.REPEATED_NAME]
    assert sum(len(trace.x) for trace in tasks) == len(prediction.spans)
    assert {trace.name for trace in tasks} == {s.label for s in prediction.spans}
    rows = {y for trace in tasks for y in trace.y}
    assert rows == {"compute stream", "NCCL stream: all-gather", "NCCL stream: reductions"}
    first = min(prediction.spans, key=lambda s: s.start_s)
    assert min(b for trace in tasks for b in trace.base) == pytest.approx(1e3 * first.start_s)


def test_scale_page_has_curves_and_table(prediction):
    """Both curves' divs, one table row per node count, and 90.0% efficiency for the second row."""
    page = scale_report_html("scaling", _scale_rows(prediction))
    for div in SCALE_DIVS:
        assert f'id="{div}"' in page
    assert page.count("<tr>") == 3 and "<td>100.0%</td></tr>" in page and "<td>90.0%</td></tr>" in page
    assert '<script src="http' not in page


@pytest.mark.parametrize("command", [["predict"], ["scale", "--nodes", "1,2"]])
def test_cli_writes_the_report(tmp_path, command):
    """--report FILE.html writes a page with the command's figures."""
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", *command, "--report", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'class="plotly-graph-div' in page


def test_report_to_a_missing_folder_is_a_clear_error(tmp_path):
    """--report into a folder that does not exist: exit 2 naming the file."""
    target = tmp_path / "nope" / "report.html"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--report", str(target)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "report.html" in result.stderr


def _page_console_messages(stderr: str) -> list[str]:
    """The page's console messages in Chromium's stderr; Chromium's own log lines (D-Bus, GPU,
    sandbox warnings on a bare machine) are not console messages and are left out."""
    return [match["message"] for line in stderr.splitlines() if (match := CONSOLE_LINE.match(line))]


@pytest.mark.parametrize("kind", ["step", "scale"])
def test_chromium_renders_offline_without_console_errors(tmp_path, prediction, kind):
    """Headless Chromium, with every host name unresolvable, loads the page from a file: the page
    logs nothing to the console (no uncaught exception, no failed load, no console.error: a
    Chromium of this generation logs console.error at INFO, so any page message fails) and each
    figure's div holds plotly's rendered SVG."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium, chromium-browser or google-chrome on PATH (CI installs Debian's chromium)")
    if kind == "step":
        page, divs = step_report_html("step", prediction), STEP_DIVS
    else:
        page, divs = scale_report_html("scale", _scale_rows(prediction)), SCALE_DIVS
    path = tmp_path / "report.html"
    path.write_text(page)
    result = subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    messages = _page_console_messages(result.stderr)
    assert messages == [] and "Uncaught" not in result.stderr, messages
    dom = result.stdout
    starts = [dom.index(f'id="{div}"') for div in divs] + [len(dom)]
    for div, start, end in zip(divs, starts, starts[1:], strict=False):
        assert 'class="main-svg"' in dom[start:end], f"figure {div} did not render"


def test_step_page_states_the_job_and_what_training_costs(tmp_path):
    """predict --report: the page names the resolved job (sequence, batches, recompute, precision) and the
    failure-free days, GPU-hours, cost at the given price and energy for the tokens given."""
    out = tmp_path / "step.html"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--report", str(out),
                             "--train-tokens", "2T", "--failures", "none", "--usd-per-gpu-hour", "2.5"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    for text in ("Job: sequence 4,096, micro-batch 2", "recompute selective", "days to train on 2e+12 tokens",
                 "GPU-hours", "cost at $2.5 per GPU-hour", "GPU energy (MWh)"):
        assert text in page, text
