"""The console of a run as a person sees it: the live display at the start, the middle and the end of a run.

    python bench/console_bench.py [--outputs 200] [--latency-ms 150] [--width 110]

Runs the trec evaluator (umbrela, nuggets, citation, no_answer) on ``--outputs`` synthetic outputs (one run per
query, three passages each, two cited statements) against the simulated judge with ``--latency-ms`` per reply, and
prints what the live display shows when the first part has finished a few outputs, halfway (half of every part's
outputs done, on average) and when the run ends, with the elapsed seconds and the ETA each snapshot showed, then
how long the run really took.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--width", type=int, default=110)
    args = parser.parse_args()

    from open_rag_eval.cli.console import ProgressDisplay
    from open_rag_eval.config import load_config
    from open_rag_eval.core.progress import Progress
    from open_rag_eval.run import pipeline

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "in.jsonl").write_text(_outputs(args.outputs), encoding="utf-8")
        (folder / "c.yaml").write_text(
            "input: in.jsonl\noutput_dir: out\njudge: {model: simulated-judge, cache: false, simulated: "
            f"{{latency_ms: {args.latency_ms}, seed: 1}}}}\nevaluators: [{{type: trec, metrics: [umbrela, nuggets, "
            "citation, no_answer]}]\n", encoding="utf-8")
        loaded = load_config(folder / "c.yaml")
        progress = Progress()
        display = ProgressDisplay(progress, io.StringIO(), tty=True)
        started = time.monotonic()
        worker = threading.Thread(target=pipeline.run, args=(loaded,), kwargs={"progress": progress})
        worker.start()
        shots: list[tuple[str, str]] = []
        wanted = [("start", lambda s, parts: max(parts, default=0) >= 3),
                  ("middle", lambda s, parts: bool(parts) and sum(parts) / len(parts) >= args.outputs / 2)]
        while worker.is_alive():
            trec = progress.parts.get("trec", {})
            counts = [count.done for count in trec.values()]
            shown = _render(display, args.width)  # as the live display does, four times a second
            if wanted and wanted[0][1](progress, counts):
                shots.append((wanted.pop(0)[0], shown))
            time.sleep(0.25)
        worker.join()
        shots.append(("end", _render(display, args.width)))
        took = time.monotonic() - started
    for name, text in shots:
        print(f"--- {name}")
        print(text)
    print(f"--- the run took {took:.1f}s")


if __name__ == "__main__":
    main()
