"""Check that a change leaves results byte-identical: the demo and a 500-query run, evaluated by two source trees.

The "before" tree is a git revision (default ``main``) exported to a temporary folder; the "after" tree is this
checkout. Each tree runs ``open-rag-eval eval`` as a child process (its folder first on ``PYTHONPATH``), with a
fresh cache of its own, on:

- the demo (``configs/demo.yaml``: the in-process simulated judge, noise, consistency over repeated runs);
- N synthetic queries x 5 passages (default 500; ``judge_bench.make_rows``) against one ``simulate-judge`` server.

results.csv, summary.csv, results.json and outputs.jsonl must be equal byte for byte; manifest.json must be equal
once the fields that differ from run to run by nature are removed (creation time, wall time). Exits 1 on any
difference, naming the file.

    python bench/same_results.py                    # main vs this checkout
    python bench/same_results.py --before HEAD~3 --queries 100
    python bench/same_results.py --before HEAD~3 --keep same-out   # keep both trees' outputs to read a difference
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from judge_bench import make_rows, write_csv
from scale_bench import start_judge

ROOT = Path(__file__).resolve().parent.parent
SAME_BYTES = ("results.csv", "summary.csv", "results.json", "outputs.jsonl")
VOLATILE = ("created", "wall_time_s")


def export(revision: str, folder: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    folder.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def evaluate(tree: Path, config: Path, out: Path) -> None:
    for stale in config.parent.glob("cache.sqlite*"):  # each tree asks the judge everything itself
        stale.unlink()
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", OPEN_RAG_EVAL_SAME_KEY="simulated")
    # -P: nothing before PYTHONPATH on the path; with "-m" alone the current folder comes first, and a run started in
    # a checkout evaluated that checkout's package in both trees
    done = subprocess.run([sys.executable, "-P", "-m", "open_rag_eval", "-q", "eval", "--config", str(config),
                           "--output-dir", str(out)], env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 6):
        sys.exit(f"{tree}: eval exited {done.returncode}: {done.stderr[-1500:]}")


def _manifest(path: Path) -> Any:
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in VOLATILE:
        data.pop(key, None)
    return data


def compare(label: str, before: Path, after: Path) -> bool:
    same = True
    for name in SAME_BYTES:
        a, b = before / name, after / name
        if a.exists() != b.exists() or (a.exists() and a.read_bytes() != b.read_bytes()):
            print(f"  {label}: {name} differs")
            same = False
    a, b = _manifest(before / "manifest.json"), _manifest(after / "manifest.json")
    if a != b:
        keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
        print(f"  {label}: manifest.json differs in {keys}")
        same = False
    sizes = ", ".join(f"{n} {(after / n).stat().st_size:,} B" for n in SAME_BYTES if (after / n).exists())
    print(f"{label}: {'identical' if same else 'DIFFERENT'} ({sizes})")
    return same


def demo_config(work: Path) -> Path:
    """The demo's config and data in ``work`` (its cache there too)."""
    (work / "data").mkdir()
    (work / "data" / "demo.csv").write_bytes((ROOT / "configs" / "data" / "demo.csv").read_bytes())
    text = (ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8")
    text = text.replace("cache: ../.open-rag-eval/demo-cache.sqlite", "cache: cache.sqlite")
    path = work / "demo.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def synthetic_config(work: Path, base_url: str) -> Path:
    path = work / "synthetic.yaml"
    path.write_text(f"input: data.csv\noutput_dir: out\njudge:\n  model: simulated-judge\n"
                    f"  base_url: {base_url}\n  api_key_env: OPEN_RAG_EVAL_SAME_KEY\n  max_concurrency: 64\n"
                    "  cache: cache.sqlite\nevaluators:\n  - type: trec\n    k_values: [1, 3, 5]\n",
                    encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="git revision of the 'before' tree (default main)")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="an empty or new folder: work there and keep the outputs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="same-results-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        if args.keep:
            work.mkdir(parents=True, exist_ok=True)
            if any(work.iterdir()):
                parser.error(f"--keep {args.keep}: not empty")
        trees = {"before": export(args.before, work / "before-tree"), "after": ROOT}
        (work / "demo").mkdir()
        config = demo_config(work / "demo")
        for tag, tree in trees.items():
            evaluate(tree, config, work / f"demo-{tag}")
        same = compare("demo", work / "demo-before", work / "demo-after")
        (work / "synthetic").mkdir()
        write_csv(work / "synthetic" / "data.csv", make_rows(args.queries, 5, args.seed))
        server, base_url = start_judge(0, 0)
        try:
            config = synthetic_config(work / "synthetic", base_url)
            for tag, tree in trees.items():
                evaluate(tree, config, work / f"synthetic-{tag}")
        finally:
            server.terminate()
            server.wait(timeout=30)
        same = compare(f"{args.queries} queries x 5 passages", work / "synthetic-before",
                       work / "synthetic-after") and same
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
