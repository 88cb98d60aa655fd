"""The acceptance suite's helpers: the installed console script as a user runs it, and the reviewed expected files.

``run`` starts ``open-rag-eval`` (the console script next to ``sys.executable``, this tree first on PYTHONPATH) as a
subprocess, offline. ``check_expected(name, found)`` compares a workflow's key numbers with
``expected/<name>.json`` (floats to 1e-9; everything else exactly); an intended change of results rewrites the file
in the same commit (``OPEN_RAG_EVAL_UPDATE_EXPECTED=1`` writes what was found) and says why.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parent / "expected"
SCRIPT = Path(sys.executable).parent / "open-rag-eval"
TIMEOUT_S = 300  # a generous bound for a loaded machine: a hang fails the test, not the suite


def environment(**extra: str) -> dict[str, str]:
    """The process environment of a user's run: this tree first on PYTHONPATH, offline, no colours."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", **extra}


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``open-rag-eval ARGS...`` in ``cwd``, as installed."""
    assert SCRIPT.is_file(), f"the console script is not installed next to the interpreter: {SCRIPT}"
    return subprocess.run([str(SCRIPT), *map(str, args)], cwd=cwd, env=env or environment(), capture_output=True,
                          text=True, timeout=timeout, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``done`` after checking it exited 0 (its output in the message otherwise)."""
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def rows(folder: Path, name: str = "results.csv") -> list[dict[str, str]]:
    with (folder / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def means(folder: Path, prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
    """summary.csv's metric -> [mean, n] (the metrics starting with ``prefixes``; every one without)."""
    return {row["metric"]: [float(row["mean"]) if row["mean"] else None, int(row["n"])] for row in rows(
        folder, "summary.csv") if not prefixes or row["metric"].startswith(prefixes)}


def check_expected(name: str, found: Any) -> None:
    """``found`` equals ``expected/<name>.json`` (floats within 1e-9)."""
    path = EXPECTED / f"{name}.json"
    if os.environ.get("OPEN_RAG_EVAL_UPDATE_EXPECTED"):
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert path.is_file(), f"no expected file {path.name}: review the numbers and write it " \
                           "(OPEN_RAG_EVAL_UPDATE_EXPECTED=1)"
    expected = json.loads(path.read_text(encoding="utf-8"))
    differences = list(_differences(expected, json.loads(json.dumps(found)), name))
    assert not differences, "results differ from " + path.name + ":\n" + "\n".join(differences[:20])


def _differences(expected: Any, found: Any, where: str) -> Any:
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            if key not in found or key not in expected:
                yield f"{where}.{key}: expected {expected.get(key)!r}, found {found.get(key)!r}"
            else:
                yield from _differences(expected[key], found[key], f"{where}.{key}")
    elif isinstance(expected, list) and isinstance(found, list) and len(expected) == len(found):
        for i, (a, b) in enumerate(zip(expected, found)):
            yield from _differences(a, b, f"{where}[{i}]")
    elif isinstance(expected, float) or isinstance(found, float):
        if not (isinstance(expected, (int, float)) and isinstance(found, (int, float))
                and math.isclose(expected, found, rel_tol=0, abs_tol=1e-9)):
            yield f"{where}: expected {expected!r}, found {found!r}"
    elif expected != found:
        yield f"{where}: expected {expected!r}, found {found!r}"
