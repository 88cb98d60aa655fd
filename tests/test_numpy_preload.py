"""numpy's preload (``scoring.stats.preload``): its thread imports numpy and the parts numpy loads at their first
use (its random generator, ``numpy.ma`` for ``quantile``), so the summary's bootstrap finds them imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

PRELOADED = """
import json, sys, threading
from open_rag_eval.scoring.stats import bootstrap_ci, preload

before = sorted(name for name in ("numpy", "numpy.ma", "numpy.random") if name in sys.modules)
if sys.argv[1] == "preload":
    preload()
for thread in threading.enumerate():
    if thread.name == "preload-numpy":
        thread.join()
after = sorted(name for name in ("numpy", "numpy.ma", "numpy.random") if name in sys.modules)
print(json.dumps({"before": before, "after": after, "ci": bootstrap_ci([1.0, 2.0, 3.0, 4.0])}))
"""


def _run(how: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PRELOADED), how], capture_output=True, text=True,
                          timeout=120, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_preload_thread_imports_what_the_bootstrap_uses_and_leaves_its_figures_alone() -> None:
    warmed, cold = _run("preload"), _run("none")
    assert warmed["before"] == [] and warmed["after"] == ["numpy", "numpy.ma", "numpy.random"]
    assert cold["after"] == []
    assert warmed["ci"] == cold["ci"]  # seed 0 per interval: the warm-up's own draw changes no figure
    assert 1.0 < warmed["ci"][0] < 2.5 < warmed["ci"][1] < 4.0
