"""The console of a run as a person sees it, and how true its ETA is.

    python bench/console_bench.py [--outputs 30 80 400] [--latency-ms 150] [--change 200 300] [--load N]
                                  [--width 110] [--shots]

Runs the trec evaluator (umbrela, nuggets, citation, no_answer) on each ``--outputs`` count of synthetic outputs
(one run per query, three passages each, two cited statements) against the simulated judge with ``--latency-ms`` per
reply; with ``--change MS ...``, one more run of the last count per MS whose judge answers in MS per reply from the
moment half of the run's planned judge requests have been sent. Four times a second (as the live display refreshes)
it reads what the display shows as the ETA (the time until the run's judge work is done); when the run has ended, it
prints each sample beside the true time left until the judge's last reply, their ratio and whether the sample is
within x0.67-x1.5 of the truth (``ok``; "ETA <1s", the console's least, is ok while the truth is under 1.5 s), says
unknown (``unknown``: no number, e.g. while the plan is made) or is outside (``OUT``), and beside the time left
until the run ended (writing the results, which the ETA does not model, comes after the judging); samples in the
first 20% of the run, and those after the judging, are listed but not judged.
``--shots`` also prints the live display at the start, the middle and the end of each run. The machine's load
average is printed before and after, and each run's mean load (one-minute average, sampled) beside it: run it niced
on a shared machine. ``--load N`` runs N busy processes beside each run (at the bench's own nice level, so on a shared
machine they take their CPU from the bench, not from other work) to see the ETA on a loaded machine. A summary
line per run ends the output; a miss before a midway change of latency shows (the change plus the new latency: its
first reply) is counted apart: no model knows a slowdown before it comes.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BAND = (0.67, 1.5)
JUDGED_AFTER = 0.2  # samples after this share of the run are judged


def _outputs(n: int) -> str:
    lines = []
    for i in range(n):
        docs = [{"id": f"d{j}", "text": f"Fact {j} about topic {i}: it is studied widely."} for j in range(3)]
        answer = [{"text": f"Topic {i} is studied widely.", "citations": ["d0"]},
                  {"text": f"Fact {i} matters.", "citations": ["d1"]}]
        lines.append(json.dumps({"query_id": f"q{i}", "query": f"What about topic {i}?", "passages": docs,
                                 "answer": answer}))
    return "\n".join(lines) + "\n"


def _render(display: Any, width: int) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False)
    console.print(display.renderable())
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


_ETA = re.compile(r"ETA (unknown|measuring|<1s|(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?)")
UNDER = 1.0  # "ETA <1s": the console's least number; within the band while the truth is under UNDER x 1.5 s


def _seconds(shown: str) -> float | None:
    """The number of seconds an ETA text says (None: unknown; "<1s" reads as 1 s, a bound)."""
    found = _ETA.search(shown)
    if found is None or found.group(1) in ("unknown", "measuring"):
        return None
    if found.group(1) == "<1s":
        return UNDER
    hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups()[1:])
    return hours * 3600 + minutes * 60 + seconds


@dataclass
class Sample:
    at: float  # seconds since the run started
    shown: str  # what the display said ("ETA 12s", "ETA unknown (planning)", "" when none shown)


def _capture_servers() -> list[Any]:
    """Every simulated judge server started from now on (to change its latency midway)."""
    from open_rag_eval.judge import simulated

    servers: list[Any] = []
    init = simulated.SimulatedJudgeServer.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        servers.append(self)

    simulated.SimulatedJudgeServer.__init__ = recording  # type: ignore[method-assign]
    return servers


@dataclass
class Run:
    samples: list[Sample]
    took: float  # seconds the run took
    judged_end: float  # when its judge work ended (the judge's last reply), seconds from its start
    shots: list[tuple[str, str]]  # the display at the start, middle and end
    changed: str  # when the judge's latency changed ("" when it did not)
    changed_at: float | None
    change_s: float  # the new latency: its first reply comes this long after the change (before it, none can know)
    load: float  # the mean one-minute load average over the run's samples


def run_once(n: int, latency_ms: float, change_ms: float | None, width: int, servers: list[Any]) -> Run:
    """One run of ``n`` outputs, sampled four times a second as the live display refreshes."""
    from open_rag_eval.cli.console import ProgressDisplay
    from open_rag_eval.config import load_config
    from open_rag_eval.core.eta import Lag
    from open_rag_eval.core.progress import Progress
    from open_rag_eval.run import pipeline

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "in.jsonl").write_text(_outputs(n), encoding="utf-8")
        (folder / "c.yaml").write_text(
            "input: in.jsonl\noutput_dir: out\njudge: {model: simulated-judge, cache: false, simulated: "
            f"{{latency_ms: {latency_ms}, seed: 1}}}}\nevaluators: [{{type: trec, metrics: [umbrela, nuggets, "
            "citation, no_answer]}]\n", encoding="utf-8")
        loaded = load_config(folder / "c.yaml")
        progress = Progress()
        lag = Lag().start()  # as the display starts it when a run enters it
        display = ProgressDisplay(progress, io.StringIO(), tty=True, lag=lag)
        del servers[:]
        started = time.monotonic()
        display.started = started
        worker = threading.Thread(target=pipeline.run, args=(loaded,), kwargs={"progress": progress})
        worker.start()
        samples: list[Sample] = []
        shots: list[tuple[str, str]] = []
        changed, changed_at, loads = "", None, []
        while worker.is_alive():
            now = time.monotonic()
            _render(display, width)  # as the live display does, four times a second
            stage = progress.stage
            detail = display.stage_detail(stage, now) if stage else ""
            found = _ETA.search(detail)
            samples.append(Sample(now - started, found.group(0) + detail[found.end():].split(" · ")[0]
                                  if found else ""))
            if change_ms is not None and not changed and _half_sent(progress) and servers:
                servers[0].config = servers[0].config.model_copy(update={"latency_ms": change_ms})
                changed_at = now - started
                changed = f"latency {latency_ms:g} -> {change_ms:g} ms at {changed_at:.2f}s"
            if len(shots) < 2 and _shot_due(progress, n, len(shots)):
                shots.append((("start", "middle")[len(shots)], _render(display, width)))
            loads.append(os.getloadavg()[0])
            time.sleep(0.25)
        worker.join()
        lag.stop()
        shots.append(("end", _render(display, width)))
        # the judge's work ends with its last reply (the stage then scores what it got, in this process)
        judged_end = max(ended for ended, _ in progress.judge.timing._done) - started
        return Run(samples, time.monotonic() - started, judged_end, shots, changed, changed_at,
                   (change_ms or 0.0) / 1000, sum(loads) / max(1, len(loads)))


def _half_sent(progress: Any) -> bool:
    work, judge = progress.work, progress.judge
    if work is None or judge is None:
        return False
    total = judge.accounting.total()
    return total.calls + total.cache_hits >= sum(work.calls.values()) / 2


def _shot_due(progress: Any, n: int, taken: int) -> bool:
    counts = [count.done for count in progress.parts.get("trec", {}).values()]
    if taken == 0:
        return max(counts, default=0) >= 3
    return bool(counts) and sum(counts) / len(counts) >= n / 2


@dataclass
class Tally:
    ok: int = 0
    unknown: int = 0
    out: int = 0
    out_before_change: int = 0  # of ``out``: samples before the judge's latency changed
    out_run: int = 0  # numbers outside the band against the run's own end

    def line(self) -> str:
        before = f" ({self.out_before_change} of them before the change)" if self.out_before_change else ""
        return (f"{self.ok + self.unknown} of {self.ok + self.unknown + self.out} in band or unknown: {self.ok} ok, "
                f"{self.unknown} unknown, {self.out} outside x{BAND[0]}-x{BAND[1]}{before}")


def table(run: Run) -> tuple[list[str], Tally]:
    """The rows of the samples' table and the tally of the judged samples. The ETA is the time until the run's judge
    work is done (the judge's last reply): its truth; the ratio to the run's own end (scoring the last replies and
    writing the results, which the ETA does not model) beside it."""
    rows = [f"{'t (s)':>6}  {'run':>4}  {'displayed':<40}  {'judging left':>12}  {'ratio':>6}  {'run left':>8}  "
            f"{'ratio':>6}  verdict"]
    tally = Tally()
    for sample in run.samples:
        left, run_left = run.judged_end - sample.at, run.took - sample.at
        shown = _seconds(sample.shown)
        ratio = "" if shown is None or left <= 0 else f"{shown / left:.2f}"
        run_ratio = "" if shown is None else f"{shown / run_left:.2f}"
        if sample.at < JUDGED_AFTER * run.took:
            verdict = "(first 20%)"
        elif left <= 0:
            verdict = "(judging done: writing)"
        elif shown is None:
            verdict, tally.unknown = "unknown", tally.unknown + 1
        elif BAND[0] <= shown / left <= BAND[1] or ("<1s" in sample.shown and left < UNDER * BAND[1]):
            verdict, tally.ok = "ok", tally.ok + 1
        else:
            verdict, tally.out = "OUT", tally.out + 1
            if run.changed_at is not None and sample.at < run.changed_at + run.change_s:
                verdict, tally.out_before_change = "OUT (before the change)", tally.out_before_change + 1
        if shown is not None and verdict in ("ok", "OUT") and not BAND[0] <= shown / run_left <= BAND[1]:
            tally.out_run += 1
        rows.append(f"{sample.at:>6.2f}  {sample.at / run.took:>4.0%}  {sample.shown or '(none shown)':<40}  "
                    f"{max(left, 0):>11.2f}s  {ratio:>6}  {run_left:>7.2f}s  {run_ratio:>6}  {verdict}")
    return rows, tally


def _hog() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, nargs="+", default=[30, 80, 400])
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--change", type=float, nargs="*", default=[200.0, 300.0], metavar="MS",
                        help="one more run of the last count per MS, whose judge answers in MS once half its requests "
                             "are sent (none: no such run)")
    parser.add_argument("--load", type=int, default=0, metavar="N", help="N busy processes beside each run")
    parser.add_argument("--width", type=int, default=110)
    parser.add_argument("--shots", action="store_true", help="print the live display at the start, middle, end")
    args = parser.parse_args()

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (cpus: {os.cpu_count()}, "
          f"nice {os.nice(0)}, {args.load} busy processes beside each run)")
    servers = _capture_servers()
    runs = [(n, None) for n in args.outputs] + [(args.outputs[-1], change) for change in args.change]
    summary = []
    for n, change in runs:
        hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.load)]
        for hog in hogs:
            hog.start()
        try:
            run = run_once(n, args.latency_ms, change, args.width, servers)
        finally:
            for hog in hogs:
                hog.terminate()
                hog.join()
        rows, tally = table(run)
        name = f"{n} outputs, judge {args.latency_ms:g} ms" + (f"; {run.changed}" if run.changed else "")
        head = (f"{name}: run {run.took:.2f}s, judging {run.judged_end:.2f}s, load {run.load:.1f}; samples after 20% "
                f"and before the judging ends: {tally.line()} ({tally.out_run} numbers outside against the run's end)")
        print(f"\n=== {head}")
        print("\n".join(rows))
        if args.shots:
            for label, text in run.shots:
                print(f"--- {label}\n{text}")
        summary.append(head)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
