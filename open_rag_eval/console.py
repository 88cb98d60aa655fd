"""What the CLI shows a person: a progress line, the dry-run plan, the final summary."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TextIO

from open_rag_eval.config import LoadedConfig
from open_rag_eval.evaluators.base import Plan
from open_rag_eval.pipeline import Progress, RunReport
from open_rag_eval.report.names import is_dispersion
from open_rag_eval.types import RAGOutput

__all__ = ["ProgressLine", "print_plan", "print_summary"]

log = logging.getLogger("open_rag_eval")

SIMULATED = "SIMULATED JUDGE: these scores come from the loopback simulated judge and mean nothing about a real system"


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _money(value: float | None) -> str:
    return "unknown (no price for this model; set judge.prices)" if value is None else f"${value:.4f}"


class ProgressLine:
    """Redraws one status line on a terminal (every 0.5 s), or logs one every 15 s elsewhere."""

    def __init__(self, progress: Progress, stream: TextIO) -> None:
        self.progress, self.stream = progress, stream
        self.tty = stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ProgressLine:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(0.5 if self.tty else 15.0):
            text = self.text(time.monotonic() - started)
            if self.tty:
                self.stream.write("\r\033[K" + text)
                self.stream.flush()
            else:
                log.info("%s", text)

    def text(self, elapsed: float) -> str:
        p = self.progress
        parts = [f"{elapsed:5.0f}s"]
        parts += [f"{name} {done}/{p.outputs_total}" for name, done in p.done.items()]
        accounting = getattr(p.judge, "accounting", None)
        if accounting is not None:
            total = accounting.snapshot()["total"]
            parts.append(f"judge calls {total['calls']}, cache hits {total['cache_hits']}")
            if total.get("cost_usd") is not None:
                parts.append(f"${total['cost_usd']:.4f}")
        return " | ".join(parts)


def print_plan(loaded: LoadedConfig, outputs: Sequence[RAGOutput], plan: Plan) -> None:
    from open_rag_eval.judge.accounting import price_for

    judge = loaded.judge
    _out(f"dry run: {len(outputs)} outputs of {len({o.query_id for o in outputs})} queries; nothing was called")
    _out(f"planned judge calls: {plan.calls} (before cache hits)")
    _out(f"estimated tokens: {plan.prompt_tokens} prompt, {plan.completion_tokens} completion")
    price = price_for(judge.model, judge.prices)
    cost = None if price is None else (plan.prompt_tokens * price.input + plan.completion_tokens * price.output) / 1e6
    shown = "none (simulated judge)" if judge.simulated is not None else _money(cost)
    _out(f"estimated cost with {judge.model}: {shown}")
    for note in plan.notes:
        _out(f"note: {note}")


def print_summary(report: RunReport) -> None:
    if report.simulated:
        _out(SIMULATED)
    shown = [a for a in report.summary if not is_dispersion(a.metric)]
    width = max((len(a.metric) for a in shown), default=10)
    _out(f"{'metric':<{width}}  {'mean':>8}  {'95% CI':>19}  {'n':>5}  {'failed':>6}")
    for a in shown:
        mean = "" if a.mean is None else f"{a.mean:.4f}"
        ci = "" if a.ci95_low is None else f"[{a.ci95_low:.4f}, {a.ci95_high:.4f}]"
        _out(f"{a.metric:<{width}}  {mean:>8}  {ci:>19}  {a.n:>5}  {a.n_failed:>6}")
    hidden = len(report.summary) - len(shown)
    if hidden:
        _out(f"(and {hidden} per-query dispersion statistics across runs: see summary.csv)")
    _accounting_line(report.manifest.get("accounting"), report.simulated)
    _out(f"results: {report.output_dir} (results.csv, summary.csv, results.json, manifest.json, report.html)")
    if report.simulated:
        _out(SIMULATED)


def _accounting_line(snapshot: dict[str, Any] | None, simulated: bool) -> None:
    if not snapshot:
        return
    total = snapshot["total"]
    cost = "none (simulated judge)" if simulated else _money(total.get("cost_usd"))
    _out(
        f"judge: {total['calls']} calls, {total['cache_hits']} cache hits, {total['retries']} retries, "
        f"{total['failures']} failures, {total['prompt_tokens']} prompt + {total['completion_tokens']} completion "
        f"tokens, cost {cost}"
    )
