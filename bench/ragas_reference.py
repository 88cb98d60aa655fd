"""Record ragas 0.4.3's own scoring code on fixed verdicts, as test data (tests/data/reference_ragas/formulas.json).

    python bench/ragas_reference.py [--venv DIR] [--out tests/data/reference_ragas/formulas.json]

Installs ragas 0.4.3 from PyPI into a virtualenv of its own (``--venv``, made once) and runs
bench/ragas_reference_driver.py there: ragas's Faithfulness, ContextRecall, ContextPrecision, AnswerCorrectness,
fbeta_score and ContextRelevance scoring code fed every verdict vector and count the crosscheck uses (no LLM
call). tests/test_reference_ragas.py compares our metrics with the file offline; docs/generation.md lists the
differences. It prints how many values were recorded. PyPI must be reachable; the test suite never runs it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("ragas_reference")

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ragas==0.4.3"


def make_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PACKAGE], check=True)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/ragas-0.4.3-venv"), help="its virtualenv")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "reference_ragas" / "formulas.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    python = make_venv(args.venv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPENAI_API_KEY": "sk-unused"}  # some ragas modules want one at import; none is called
    # -I: neither PYTHONPATH nor this checkout reaches its interpreter
    subprocess.run([str(python), "-I", str(ROOT / "bench" / "ragas_reference_driver.py"), str(args.out)], check=True,
                   env=env)
    recorded = json.loads(args.out.read_text(encoding="utf-8"))
    log.info("ragas 0.4.3: %d values recorded in %s (%s)", sum(len(v) for v in recorded.values()), args.out,
             ", ".join(f"{name} {len(values)}" for name, values in recorded.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
