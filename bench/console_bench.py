"""The console of a run as a person sees it, and how true its ETA is.

    python bench/console_bench.py [--outputs 30 80 400] [--latency-ms 150] [--change 300] [--width 110] [--shots]

Runs the trec evaluator (umbrela, nuggets, citation, no_answer) on each ``--outputs`` count of synthetic outputs
(one run per query, three passages each, two cited statements) against the simulated judge with ``--latency-ms`` per
reply; with ``--change MS``, one more run of the last count whose judge answers in MS per reply from the moment half
of the run's planned judge requests have been sent. Four times a second (as the live display refreshes) it reads
what the display shows as the ETA (the time until the run's judge work is done); when the run has ended, it prints
each sample beside the true time left until the judge's last reply, their ratio and whether the sample is within
x0.67-x1.5 of the truth (``ok``), says unknown (``unknown``: no number, e.g. while the plan is made) or is outside
(``OUT``), and beside the time left until the run ended (writing the results, which the ETA does not model, comes
after the judging); samples in the first 20% of the run, and those after the judging, are listed but not judged.
``--shots`` also prints the live display at the start, the middle and the end of each run. The machine's load
average is printed first: run it niced on a shared machine.
"""

from __future__ import annotations

import argparse
import io
import json
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


_ETA = re.compile(r"ETA (unknown|measuring|(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?)")


def _seconds(shown: str) -> float | None:
    """The number of seconds an ETA text says (None: unknown)."""
    found = _ETA.search(shown)
    if found is None or found.group(1) in ("unknown", "measuring"):
        return None
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


def run_once(n: int, latency_ms: float, change_ms: float | None, width: int,
             servers: list[Any]) -> tuple[list[Sample], float, float, list[tuple[str, str]], str]:
    """One run: its samples, how long it took, when its judge work ended (seconds from its start), the display at
    the start, middle and end, and when the judge's latency changed."""
    from open_rag_eval.cli.console import ProgressDisplay
    from open_rag_eval.config import load_config
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
        display = ProgressDisplay(progress, io.StringIO(), tty=True)
        del servers[:]
        started = time.monotonic()
        display.started = started
        worker = threading.Thread(target=pipeline.run, args=(loaded,), kwargs={"progress": progress})
        worker.start()
        samples: list[Sample] = []
        shots: list[tuple[str, str]] = []
        changed = ""
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
                changed = f"latency {latency_ms:g} -> {change_ms:g} ms at {now - started:.2f}s"
            if len(shots) < 2 and _shot_due(progress, n, len(shots)):
                shots.append((("start", "middle")[len(shots)], _render(display, width)))
            time.sleep(0.25)
        worker.join()
        shots.append(("end", _render(display, width)))
        # the judge's work ends with its last reply (the stage then scores what it got, in this process)
        judged_end = max(ended for ended, _ in progress.judge.timing._done) - started
        return samples, time.monotonic() - started, judged_end, shots, changed


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


def table(samples: list[Sample], took: float, judged_end: float) -> tuple[list[str], int, int, int, int]:
    """The rows of the samples' table and the judged samples: (rows, ok, unknown, out, out against the run's end).
    The ETA is the time until the run's judge work is done (the judge's last reply): its truth; the ratio to the
    run's own end (scoring the last replies and writing the results, which the ETA does not model) beside it."""
    rows = [f"{'t (s)':>6}  {'run':>4}  {'displayed':<40}  {'judging left':>12}  {'ratio':>6}  {'run left':>8}  "
            f"{'ratio':>6}  verdict"]
    ok = unknown = out = out_run = 0
    for sample in samples:
        left, run_left = judged_end - sample.at, took - sample.at
        shown = _seconds(sample.shown)
        ratio = "" if shown is None or left <= 0 else f"{shown / left:.2f}"
        run_ratio = "" if shown is None else f"{shown / run_left:.2f}"
        if sample.at < JUDGED_AFTER * took:
            verdict = "(first 20%)"
        elif left <= 0:
            verdict = "(judging done: writing)"
        elif shown is None:
            verdict, unknown = "unknown", unknown + 1
        elif BAND[0] <= shown / left <= BAND[1]:
            verdict, ok = "ok", ok + 1
        else:
            verdict, out = "OUT", out + 1
        if verdict in ("ok", "OUT") and not BAND[0] <= shown / run_left <= BAND[1]:  # type: ignore[operator]
            out_run += 1
        rows.append(f"{sample.at:>6.2f}  {sample.at / took:>4.0%}  {sample.shown or '(none shown)':<40}  "
                    f"{max(left, 0):>11.2f}s  {ratio:>6}  {run_left:>7.2f}s  {run_ratio:>6}  {verdict}")
    return rows, ok, unknown, out, out_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, nargs="+", default=[30, 80, 400])
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--change", type=float, default=300.0, metavar="MS",
                        help="the latency of the last run's judge once half its requests are sent (0: no such run)")
    parser.add_argument("--width", type=int, default=110)
    parser.add_argument("--shots", action="store_true", help="print the live display at the start, middle, end")
    args = parser.parse_args()

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (cpus: {os.cpu_count()}, "
          f"nice {os.nice(0)})")
    servers = _capture_servers()
    runs = [(n, None) for n in args.outputs] + ([(args.outputs[-1], args.change)] if args.change else [])
    summary = []
    for n, change in runs:
        samples, took, judged_end, shots, changed = run_once(n, args.latency_ms, change, args.width, servers)
        rows, ok, unknown, out, out_run = table(samples, took, judged_end)
        name = f"{n} outputs, judge {args.latency_ms:g} ms" + (f"; {changed}" if changed else "")
        print(f"\n=== {name}: the run took {took:.2f}s, its judge work {judged_end:.2f}s; judged samples (after 20%, "
              f"before the judging ends): {ok} ok, {unknown} unknown, {out} outside x{BAND[0]}-x{BAND[1]} "
              f"({out_run} outside against the run's own end)")
        print("\n".join(rows))
        if args.shots:
            for label, text in shots:
                print(f"--- {label}\n{text}")
        summary.append(f"{name}: run {took:.2f}s, judging {judged_end:.2f}s; {ok} ok, {unknown} unknown, {out} "
                       f"outside ({out_run} against the run's end)")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
