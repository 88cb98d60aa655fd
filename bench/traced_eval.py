"""``open-rag-eval`` under tracemalloc, for ``scale_bench.py --tracemalloc FILE``: where a run's memory goes.

    python bench/traced_eval.py TOP.txt -q eval --config eval.yaml

Runs the CLI in this process with tracemalloc on (one frame: the line that allocated, all the top 10 names). A thread looks at the traced memory every half second
and takes a snapshot whenever it is higher than at any snapshot before (and at least 10% higher than the last one,
so snapshots stay few); at exit TOP.txt gets the 10 lines of code holding the most memory in the highest snapshot.
``kill -TERM`` writes TOP.txt as it stands and exits (143): a long run's top 10 so far, e.g. 100,000 outputs on a
loaded machine. (SIGINT does not serve: a process started in the background by a shell ignores it.)
Tracing makes the run several times slower and adds its own bookkeeping to the RSS: use it for where, not how much.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path

FRAMES = 1  # statistics by line read each trace's newest frame only; more frames cost time for nothing


def main() -> None:
    target = Path(sys.argv[1])
    tracemalloc.start(FRAMES)
    best: dict[str, object] = {"traced": 0, "snapshot": None}
    lock = threading.Lock()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            current = tracemalloc.get_traced_memory()[0]
            if current > 1.1 * int(best["traced"]):  # type: ignore[call-overload]
                snapshot = tracemalloc.take_snapshot()
                with lock:
                    best.update(traced=current, snapshot=snapshot)

    def report() -> None:
        with lock:
            snapshot, traced = best["snapshot"], best["traced"]
        peak = tracemalloc.get_traced_memory()[1]
        lines = [f"tracemalloc: traced peak {peak / 1e6:.1f} MB; top 10 lines at the highest snapshot "
                 f"({int(traced) / 1e6:.1f} MB traced):"]  # type: ignore[call-overload]
        if snapshot is not None:
            snapshot = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])  # type: ignore[attr-defined]
            for stat in snapshot.statistics("lineno")[:10]:
                frame = stat.traceback[0]
                lines.append(f"  {stat.size / 1e6:8.1f} MB {stat.count:9d} blocks  {_short(frame.filename)}:{frame.lineno}")
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def stop(signum: int, frame: object) -> None:
        report()
        os._exit(128 + signum)

    atexit.register(report)
    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=watch, daemon=True).start()
    from open_rag_eval.cli import main as cli

    code = cli(sys.argv[2:])
    report()
    atexit.unregister(report)
    sys.exit(code)


def _short(filename: str) -> str:
    """The file from its package on (``open_rag_eval/run/spill.py``, ``json/decoder.py``)."""
    parts = Path(filename).parts
    for anchor in ("open_rag_eval", "site-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + (anchor == "site-packages"):])
    return "/".join(parts[-2:])


if __name__ == "__main__":
    main()
