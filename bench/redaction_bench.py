"""What redacting every output file costs: results.json-like data written through the atomic writer, with no
registered secret and with three (a judge key, a connector header, a URL password), plus ``cut`` on error bodies.

    python bench/redaction_bench.py --outputs 20000
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from open_rag_eval.core import redaction
from open_rag_eval.store.fileio import atomic_write_json

WORDS = "solar wind grid battery storage carbon policy price market coal nuclear hydro heat pump".split()


def _data(n: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    text = lambda k: " ".join(rng.choices(WORDS, k=k))  # noqa: E731
    outputs = [{"query_id": f"q{i}", "query": text(8), "run": 1, "answer_text": text(120),
                "passages": [{"id": str(p), "text": text(90)} for p in range(5)],
                "scores": {"umbrela.mean": rng.random(), "citation.support": rng.random()},
                "errors": {}, "details": {"umbrela": {"grades": [rng.randint(0, 3) for _ in range(5)]}}}
               for i in range(n)]
    return {"simulated": False, "outputs": outputs}


def _write(data: dict[str, Any], folder: Path) -> tuple[float, int]:
    started = time.perf_counter()
    atomic_write_json(folder / "results.json", data)
    return time.perf_counter() - started, (folder / "results.json").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=20000)
    args = parser.parse_args()
    data = _data(args.outputs)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain, masked, size = float("inf"), float("inf"), 0
        for _ in range(3):  # best of three, alternating (the machine may be shared)
            redaction.forget_secrets()
            seconds, size = _write(data, folder)
            plain = min(plain, seconds)
            for secret in ("sk-proj-Qm4Tz8Wc1Vr6Nh3Jd7Kb9Xp2Ly5Gf0Hs", "rq7Zx9KpW2vNt4Lm8Yc3Hd6Fb", "Vx3Bn7Qw1Ze5Rt9Yu"):
                redaction.register_secret(secret)
            masked = min(masked, _write(data, folder)[0])
    body = "x" * 5_000_000
    started = time.perf_counter()
    for _ in range(20):
        redaction.cut(body, 300)
    per_cut = (time.perf_counter() - started) / 20
    print(f"results.json of {args.outputs} outputs: {size / 1e6:.1f} MB")
    print(f"  no registered secret:   {plain:.2f} s ({size / 1e6 / plain:.0f} MB/s)")
    print(f"  3 registered secrets:   {masked:.2f} s ({size / 1e6 / masked:.0f} MB/s), "
          f"{(masked / plain - 1) * 100:+.0f}%")
    print(f"cut(5 MB error body, 300): {per_cut * 1e6:.0f} us (only a window past the cut is redacted)")


if __name__ == "__main__":
    main()
