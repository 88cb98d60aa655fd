"""The console: the live progress display (rich, snapshot-tested at a fixed width), the plain lines of CI and
pipes, retries tallied instead of printed, an unreachable judge ending on one error line, quiet third parties."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.cli.console import ProgressDisplay, quiet_third_party
from open_rag_eval.core.errors import JudgeUnavailable
from open_rag_eval.judge.accounting import Accounting
from open_rag_eval.judge.config import Price
from open_rag_eval.core.progress import Event, Progress

from tests.openai_server import Reply, ScriptedServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Judge:
    simulated = False

    def __init__(self) -> None:
        self.accounting = Accounting("gpt-4o", Price(input=2.5, output=10.0))


def _run_state(clock: Clock) -> tuple[Progress, Judge]:
    """A run 12 s in: read done, trec at 7 of 20 outputs, consistency waiting, HHEM loading."""
    progress = Progress(clock=clock)
    progress.stages = ["read", "trec", "consistency", "write"]
    progress.begin("read", "input")
    clock.now += 2.0
    progress.begin("trec")
    judge = Judge()
    judge.accounting.task("umbrela").calls = 30
    judge.accounting.task("umbrela").cache_hits = 10
    judge.accounting.task("support").calls = 12
    judge.accounting.usage("umbrela", 20_000, 100, None)
    progress.judge, progress.outputs_total = judge, 20
    progress.report("trec", "model HHEM", 0)
    clock.now += 4.0
    for _ in range(7):  # the first output 4 s into the stage, then one a second
        progress.report("trec", "outputs", 1)
        clock.now += 1.0
    clock.now -= 1.0
    return progress, judge


def _render(display: ProgressDisplay, width: int = 100) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False)
    console.print(display.renderable())
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def test_live_display_snapshot_stages_counts_rate_eta_cost() -> None:
    clock = Clock()
    progress, _ = _run_state(clock)
    display = ProgressDisplay(progress, io.StringIO(), tty=True, clock=clock)
    display.started = 100.0
    assert _render(display) == "\n".join([
        "✓ read                             done in 2.0s",
        "▸ trec        ━━━━━━━              7/20 outputs · 1.0/s · ETA unknown (planning) · HHEM model",
        "· consistency                      waiting",
        "· write                            waiting",
        "  judge   52 requests (42 calls, 10 cached) · umbrela 40, support 12 · $0.0510 so far",
        "  models  HHEM running 10s",
        "  elapsed 12s",
    ])


def test_live_display_snapshot_judge_outage_tallies_retries() -> None:
    clock = Clock()
    progress, judge = _run_state(clock)
    judge.accounting.task("umbrela").failures = 10
    display = ProgressDisplay(progress, io.StringIO(), tty=True, clock=clock)
    display.started = 100.0
    client = logging.getLogger("open_rag_eval.judge.client")
    for attempt in range(389):
        record = client.makeRecord(client.name, logging.INFO, __file__, 1, "judge: %s; retry %d/%d in %.2fs",
                                   ("cannot connect to http://127.0.0.1:9/v1", attempt % 6 + 1, 6, 0.5), None)
        assert display.tally.filter(record) is False  # taken out of the log, counted
        assert display.tally.filter(record) is False  # the same record at a second handler: counted once
    judge_row = [line for line in _render(display, 160).splitlines() if line.startswith("  judge")]
    assert judge_row == ["  judge   52 requests (42 calls, 10 cached) · umbrela 40, support 12 · 10 failed · 389 "
                         "retries (last: cannot connect to http://127.0.0.1:9/v1) · $0.0510 so far"]


def test_plain_status_line_and_retries_since_the_last_line() -> None:
    clock = Clock()
    progress, _ = _run_state(clock)
    display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock)
    display.started = 100.0
    display.tally.total = display.tally.since_status = 5
    display.tally.last = "HTTP 503"
    assert display.status_line() == ("[  12s] trec: 7/20 outputs · 1.0/s · ETA unknown (planning) · HHEM model | judge: "
                                     "52 requests (42 calls, 10 cached) · umbrela 40, support 12 · 5 retries, 5 since "
                                     "the last line (last: HTTP 503) · $0.0510 so far")
    assert "since the last line" not in display.status_line()  # counted once
    progress.end("trec")
    progress.begin("write", "report.html")
    clock.now += 1.0
    assert display.status_line().startswith("[  13s] write: report.html (1.0s) | judge:")


class EightyOutputs:
    """The shape of a trec run of 80 outputs: every UMBRELA grade first (one output's grades every 0.25 s from
    1 s in), nugget lists after them (an output's assignment every 0.2 s from 21 s), citations behind both
    (every 0.1 s from 31 s); a whole output finishes only as its last part does. The run ends at 38.9 s."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.progress = progress = Progress(clock=clock)
        progress.stages = ["read", "trec", "write"]
        progress.begin("read", "input")
        progress.begin("trec")
        progress.outputs_total = 80
        for family in ("umbrela", "nuggets", "citation"):
            progress.report("trec", f"outputs {family}", 0)
        self.start = clock.now
        self.events = sorted([(1.0 + 0.25 * i, "umbrela") for i in range(80)]
                             + [(21.0 + 0.2 * i, "nuggets") for i in range(80)]
                             + [(31.0 + 0.1 * i, "citation") for i in range(80)])

    def play(self, until: float) -> None:
        """Replay to ``until`` seconds after the stage started."""
        parts, done = self.progress.parts["trec"], self.progress.done
        while self.events and self.events[0][0] <= until:
            at, family = self.events.pop(0)
            self.clock.now = self.start + at
            self.progress.report("trec", f"outputs {family}", 1)
            whole = min(parts["nuggets"].done, parts["citation"].done)
            if whole > done.get("trec", 0):
                self.progress.report("trec", "outputs", whole - done.get("trec", 0))
        self.clock.now = self.start + until


def test_parts_are_counted_as_they_finish_and_the_eta_follows_the_slowest_part() -> None:
    clock = Clock()
    run = EightyOutputs(clock)
    progress = run.progress
    display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock)
    details = {}
    for second in (0.5, 10, 25, 36, 38.5):
        run.play(second)
        details[second] = display.stage_detail("trec", clock.now)
    assert details == {
        # nothing finished yet: no rate, so no ETA (never a guess)
        0.5: "0/80 outputs · umbrela 0/80 · nuggets 0/80 · citation 0/80 · ETA measuring",
        # grades flow at 4/s; nuggets and citations have not finished one output: still no ETA
        10: "0/80 outputs · umbrela 37/80 · nuggets 0/80 · citation 0/80 · ETA measuring",
        # nuggets flow at 5/s, but no citation has finished yet
        25: "0/80 outputs · umbrela 80/80 · nuggets 21/80 · citation 0/80 · ETA measuring",
        # citations at 10/s with 29 to go decide (nuggets: 4 to go at 5/s); the bar shows (80 + 76 + 51) / 3
        36: "51/80 outputs · umbrela 80/80 · nuggets 76/80 · citation 51/80 · ETA 2.9s",
        38.5: "76/80 outputs · umbrela 80/80 · nuggets 80/80 · citation 76/80 · ETA 0.4s",
    }


def test_the_eta_of_a_part_is_measured_from_its_own_first_output() -> None:
    """No 'ETA 14m28s' four seconds before the end: a part that started late is not judged by the stage's age."""
    clock = Clock()
    run = EightyOutputs(clock)
    progress = run.progress
    run.play(35.0)
    eta = progress.eta("trec", clock.now)
    assert eta is not None and eta == pytest.approx(max((80 - 71) / (70 / 14.0), (80 - 41) / (40 / 4.0)))
    assert eta < 4.5  # the run ends at 38.9 s


def test_live_display_snapshot_of_parts_and_a_health_event() -> None:
    clock = Clock()
    run = EightyOutputs(clock)
    progress = run.progress
    display = ProgressDisplay(progress, io.StringIO(), tty=True, clock=clock)
    display.started = clock.now
    run.play(36.0)
    progress.notify(Event("health", "after 60 UMBRELA grades: grades 0-3 all used; healthy so far"))
    progress.notify(Event("health", "after 80 UMBRELA grades: every grade is 3 (a constant judge?)", "warning"))
    assert _render(display, 110) == "\n".join([
        "✓ read                             done in 0.0s",
        "▸ trec        ━━━━━━━━━━━━━━━━━    51/80 outputs · umbrela 80/80 · nuggets 76/80 · citation 51/80 · ETA 2.9s",
        "· write                            waiting",
        "  health  after 80 UMBRELA grades: every grade is 3 (a constant judge?)",
        "  elapsed 36s",
    ])


def test_plain_lines_show_each_event_once_a_warning_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    progress = EightyOutputs(clock).progress
    display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock)
    with caplog.at_level(logging.INFO, logger="open_rag_eval"):
        progress.notify(Event("health", "after 60 UMBRELA grades: healthy so far"))
        display.log_events()
        display.log_events()
        progress.notify(Event("health", "every grade is 3", "warning"))
        display.log_events()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "health: after 60 UMBRELA grades: healthy so far"), ("WARNING", "health: every grade is 3")]


def _logger_with_handler(stream: io.StringIO | None = None) -> tuple[logging.Logger, io.StringIO, logging.Handler]:
    stream = stream or io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    return root, stream, handler


def test_retries_and_the_breaker_line_stay_out_of_the_log_and_one_error_remains() -> None:
    root, stream, handler = _logger_with_handler()
    level = root.level
    root.setLevel(logging.INFO)
    try:
        with pytest.raises(JudgeUnavailable):
            with ProgressDisplay(Progress(), io.StringIO(), tty=False, interval=3600):
                for attempt in range(50):
                    logging.getLogger("open_rag_eval.judge.client").info(
                        "judge: %s; retry %d/%d in %.2fs", "HTTP 503", attempt % 6 + 1, 6, 0.1)
                logging.getLogger("open_rag_eval.judge.limits").error("judge endpoint unavailable: %s", "down")
                logging.getLogger("open_rag_eval.inputs").warning("a warning that stays")
                raise JudgeUnavailable("down")
        assert stream.getvalue() == "a warning that stays\n"
        # not an outage after all (another error ended the run): the breaker's line is given back
        stream.truncate(0), stream.seek(0)
        with pytest.raises(RuntimeError):
            with ProgressDisplay(Progress(), io.StringIO(), tty=False, interval=3600):
                logging.getLogger("open_rag_eval.judge.limits").error("judge endpoint unavailable: %s", "down")
                raise RuntimeError("other")
        assert stream.getvalue() == "judge endpoint unavailable: down\n"
        # -v: every line shows, and is still counted
        stream.truncate(0), stream.seek(0)
        root.setLevel(logging.DEBUG)
        with ProgressDisplay(Progress(), io.StringIO(), tty=False, interval=3600) as display:
            logging.getLogger("open_rag_eval.judge.client").info("judge: %s; retry %d/%d in %.2fs", "HTTP 503", 1, 6, 0.1)
        assert stream.getvalue().splitlines()[0] == "judge: HTTP 503; retry 1/6 in 0.10s" and display.tally.total == 1
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_on_a_terminal_log_lines_print_above_the_live_display() -> None:
    screen = io.StringIO()
    root, _, handler = _logger_with_handler(screen)
    try:
        with ProgressDisplay(Progress(), screen, tty=True, width=80):
            assert handler.stream is not screen  # routed through the live console
            logging.getLogger("open_rag_eval.inputs").warning("kept: 1 citation names no passage")
        assert handler.stream is screen
    finally:
        root.removeHandler(handler)
    text = screen.getvalue()
    assert "kept: 1 citation names no passage" in text and "elapsed" in text


def test_third_party_progress_bars_are_switched_off_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # a user's own choice wins
    with ProgressDisplay(Progress(), io.StringIO(), tty=False, interval=3600):
        assert os.environ["TQDM_DISABLE"] == "1" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    assert "TQDM_DISABLE" not in os.environ and os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    import warnings

    shown = warnings.showwarning
    undo = quiet_third_party()
    assert warnings.showwarning is not shown  # Python warnings go to the log ...
    undo()
    assert warnings.showwarning is shown  # ... only while the display runs
    # tqdm reads its environment when imported: the display starts before anything imports it
    script = ("import io, sys; from open_rag_eval.cli.console import ProgressDisplay; from open_rag_eval.core.progress import "
              "Progress\nwith ProgressDisplay(Progress(), io.StringIO(), tty=False, interval=3600):\n"
              "    from tqdm import tqdm\n    list(tqdm(range(3), file=sys.stderr))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert done.stderr == ""
    loud = subprocess.run([sys.executable, "-c", "import sys; from tqdm import tqdm; list(tqdm(range(3), "
                           "file=sys.stderr))"], capture_output=True, text=True, check=True, env=env)
    assert "3/3" in loud.stderr  # the check above can fail


def _outage_config(tmp_path: Path, base_url: str, cache: str = "cache.sqlite") -> Path:
    from tests.test_pipeline import CSV

    (tmp_path / "answers.csv").write_text(CSV, encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        "input: answers.csv\noutput_dir: out\n"
        f"judge: {{model: gpt-4o, base_url: '{base_url}', api_key_env: CONSOLE_TEST_KEY, max_retries: 4,\n"
        f"        backoff_base_s: 0.01, backoff_cap_s: 0.02, outage_after_failures: 3, cache: {cache}}}\n"
        "evaluators: [{type: trec, metrics: [umbrela, no_answer]}]\n", encoding="utf-8")
    return config


def test_an_unreachable_judge_ends_with_one_error_line_and_no_retry_lines(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.error(503, "overloaded")) as server:
        config = _outage_config(tmp_path, server.base_url)
        done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "CONSOLE_TEST_KEY": "sk-test"})
    assert done.returncode == 4, done.stderr
    lines = done.stderr.splitlines()
    assert len(server.completions) > 6  # it did retry ...
    assert not [line for line in lines if "; retry " in line or "endpoint unavailable" in line]  # ... silently
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and "503" in errors[0] and "re-run the same command to resume" in errors[0]
    assert lines[-1] == errors[0] and len(lines) <= 6, done.stderr


def test_without_a_cache_a_stopped_run_does_not_promise_to_resume(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.error(503, "overloaded")) as server:
        config = _outage_config(tmp_path, server.base_url, cache="false")
        done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "CONSOLE_TEST_KEY": "sk-test"})
    assert done.returncode == 4, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "kept in the cache" not in errors[0] and "resume" not in errors[0]
    assert errors[0].endswith("(nothing judged was kept: judge.cache is false, so a re-run judges everything "
                              "again)"), errors[0]


def test_plain_progress_of_a_run_in_a_pipe(tmp_path: Path) -> None:
    from tests.test_pipeline import write_config

    config = write_config(tmp_path)
    root = str(Path(__file__).resolve().parents[1])  # the config names an evaluator in tests/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    status = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert status and status[-1].split("] ", 1)[1] == "done"
    assert "\x1b[" not in done.stderr and "\r" not in done.stderr  # plain lines, no terminal control
    assert "%|" not in done.stderr  # no third-party progress bar


def test_a_config_or_input_error_stands_alone(tmp_path: Path) -> None:
    from open_rag_eval.core.errors import InputError

    # in a pipe: no status line while reading, the error is the one line (tests/test_inputs.py checks the CLI)
    root, stream, handler = _logger_with_handler()
    level = root.level
    root.setLevel(logging.INFO)
    try:
        progress = Progress()
        progress.begin("read", "input")
        with pytest.raises(InputError):
            with ProgressDisplay(progress, io.StringIO(), tty=False):
                import time

                time.sleep(0.8)  # the plain loop wakes every 0.5 s
                raise InputError("bad cell", file="a.csv", line=2)
        assert stream.getvalue() == ""
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    # on a terminal the live display is cleared away
    progress = Progress()
    progress.begin("read", "config")
    screen = io.StringIO()
    with pytest.raises(InputError):
        with ProgressDisplay(progress, screen, tty=True, width=80) as display:
            raise InputError("bad cell", file="a.csv", line=2)
    assert display._live.transient


def test_the_summary_starts_with_the_headline_and_its_targets(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    from open_rag_eval.cli.console import print_summary
    from open_rag_eval.run.pipeline import RunReport
    from open_rag_eval.scoring.stats import Aggregate
    from open_rag_eval.core.types import EvalResult

    summary = [Aggregate("umbrela.mean", 1.25, 0.4, 1.0, 1.5, 11, 0), Aggregate("citation.f1", 0.8, 0.1, 0.7, 0.9, 11, 0),
               Aggregate("citation.fabricated", 0.5, 0.5, 0.0, 1.0, 11, 0),
               Aggregate("hhem.score", None, None, None, None, 0, 0, n_unavailable=11)]  # as summarize counts it
    manifest = {"config": {"report": {"headline": ["umbrela.mean", "citation.f1", "citation.fabricated", "hhem.score"],
                                      "targets": {"citation.fabricated": 0.0}}}}
    from open_rag_eval.core.types import Score

    reason = "HHEM weights unavailable (not in the cache)"
    result = EvalResult(scores=[Score(query_id=f"q{i}", run=1, metric="hhem.score", error=reason) for i in range(11)])
    print_summary(RunReport(result, summary, tmp_path, manifest, RunInfo(), []))
    out = capsys.readouterr().out.splitlines()
    start = out.index("headline (the numbers to look at first; report.html shows them with their distributions):")
    assert start == 0  # nothing before it (no banner: not simulated)
    assert out[start + 1:start + 5] == [
        "  umbrela.mean           1.250  [1.000, 1.500]    ↑  target ≥ 1.5: near",
        "  citation.f1            0.800  [0.700, 0.900]    ↑  target ≥ 0.7: met",
        "  citation.fabricated    0.500  [0.000, 1.000]    ↓  target ≤ 0: below",
        "  hhem.score                 –  no value: unavailable (11 outputs; report.html says why)",
    ]


def test_warnings_about_many_rows_are_one_line_per_kind(tmp_path: Path) -> None:
    """2,000 rows citing a passage they did not retrieve and one with an unknown column: two warning lines, each
    with its count and first rows, not 2,000 (the console of ``validate`` in a pipe, as CI shows it)."""
    import json

    rows = [{"query_id": f"q{i}", "query": f"Question {i}?", "answer": "It is so [1][7].",
             "passages": [{"id": "1", "text": "It is so."}]} for i in range(2000)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "c.yaml").write_text("input: in.jsonl\noutput_dir: out\njudge: {simulated: {seed: 1}}\n"
                                     "evaluators: [{type: trec}]\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "validate", "--config", "c.yaml"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.replace(str(tmp_path) + os.sep, "").splitlines() == [
        "2000 output(s): citations that name no retrieved passage (kept, counted as fabricated) in in.jsonl; first: "
        "line 1 (7); line 2 (7); line 3 (7) and 1997 more",
        "c.yaml: valid (2000 outputs of 2000 queries; evaluators: trec)",
    ]


def test_the_console_opens_on_the_headline_block_and_keeps_every_metric_for_verbose(tmp_path: Path) -> None:
    """The demo's data through the CLI: after the banner, the headline (met, near, below), the coverage, the judge
    and its health, the diagnosis; the table of every metric only with -v (else one line saying where it is)."""
    demo = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
    (tmp_path / "c.yaml").write_text(f"input: {demo}\noutput_dir: out\njudge: {{model: simulated-judge, cache: false, "
                                     "simulated: {latency_ms: 0, seed: 1}}\nevaluators: [{type: trec, metrics: "
                                     "[umbrela, nuggets, citation, no_answer]}]\n", encoding="utf-8")

    def console(*flags: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "open_rag_eval", *flags, "eval", "--config", "c.yaml"],
                              capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    out = console()
    assert out[0].startswith("SIMULATED JUDGE") and out[1].startswith("headline (the numbers to look at first")
    first = {key: next(i for i, line in enumerate(out) if line.startswith(key))
             for key in ("headline", "coverage: ", "judge: ", "judge health", "diagnosis", "all ", "results: ")}
    assert list(first) == sorted(first, key=first.__getitem__), first
    assert out[first["coverage: "]].startswith("coverage: 11 / 11 outputs fully scored · 0 failed · ")
    assert not any(line.startswith("umbrela.ndcg@") for line in out)  # the full table is behind -v
    assert out[first["all "]].startswith("all ") and "(-v prints them here)" in out[first["all "]]
    verbose = console("-v")
    assert verbose[1].startswith("headline (") and any(line.startswith("umbrela.ndcg@") for line in verbose)
    table = next(i for i, line in enumerate(verbose) if line.startswith("metric "))
    assert table > next(i for i, line in enumerate(verbose) if line.startswith("diagnosis"))
