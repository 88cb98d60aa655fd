"""Record vectara's open-rag-eval 0.3.0 itself on a generated CSV, through the simulated judge, as test data.

    python bench/vectara_reference.py [--venv DIR] [--out tests/data/reference_vectara]

1. A virtualenv of its own (``--venv``, made once): the 0.3.0 wheel from PyPI with ``--no-deps`` plus what its
   TRECEvaluator and ConsistencyEvaluator import (openai, pydantic, numpy, pandas, matplotlib, tqdm, tenacity,
   rouge). HHEM and BERTScore need model downloads: bench/vectara_reference_driver.py stubs them.
2. ``answers.csv``: four queries in vectara's CSV layout (three runs each but the last, two passages for one query,
   answers citing ``[1]``, ``[1][2]``, ``[1, 2]``, ``[1], [2]``, a passage that does not exist, none at all, a refusal).
3. The simulated judge on loopback (tests/recording_judge.py), recording every request body; a request asking for a
   JSON-schema reply (vectara asks for one on every call) gets the simulated judge's answer as that JSON
   (``{"score": "2"}``).
4. The driver runs vectara's evaluators in the virtualenv: ``results.json`` (its per-query scores) and
   ``requests.jsonl`` (each distinct request body, canonical JSON, with how many times it was sent) are written to
   ``--out``. tests/test_reference_vectara.py compares a run of ours with them offline.

It prints the number of requests and queries recorded. The recordings are committed; run it again only to refresh
them (PyPI must be reachable).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.recording_judge import RecordingJudge

log = logging.getLogger("vectara_reference")

ROOT = Path(__file__).resolve().parent.parent
WHEEL = "open-rag-eval==0.3.0"
IMPORTS = ["openai==2.7.2", "pydantic==2.11.7", "numpy~=2.2.4", "pandas==2.2.3", "matplotlib~=3.10.1",
           "tqdm==4.67.1", "tenacity~=9.1.2", "rouge==1.0.1"]

SEASONS = "What causes the seasons on Earth?"
VACCINES = "How do vaccines train the immune system?"
SKY = "Why is the sky blue?"
WATER = "What is the boiling point of water at sea level?"
PASSAGES = {
    SEASONS: ["The seasons on Earth are caused by the tilt of Earth's axis relative to its orbit around the Sun.",
              "The seasons change as each hemisphere of the Earth is tilted toward the Sun and days grow longer.",
              "Earth orbits the Sun once a year. Pluto was reclassified as a dwarf planet in 2006."],
    VACCINES: ["Vaccines train the immune system by exposing it to a harmless piece or copy of a pathogen.",
               "The immune system then makes antibodies and memory cells that recognise the pathogen later."],
    SKY: ["The sky is blue because air molecules scatter blue sunlight more than red light (Rayleigh scattering).",
          "Sunsets look red because sunlight crosses more air and the blue light is scattered away.",
          "The ocean covers about 71 percent of the Earth's surface.",
          "Blue light has a shorter wavelength than red light."],
    WATER: ["The boiling point of water at sea level is 100 degrees Celsius. Water at sea level boils at 212 degrees "
            "Fahrenheit.",
            "At higher altitude the air pressure is lower, so water boils at a lower temperature.",
            "Ice is less dense than liquid water."],
}
ANSWERS = {
    SEASONS: ["The seasons are caused by the tilt of Earth's axis [1]. Because of the tilt, each hemisphere gets more "
              "direct sunlight for part of the year [1][2].",
              "Earth's axis is tilted. The tilt of the axis causes the seasons [1, 2]. Pluto is a dwarf planet [3].",
              "Seasons come from the axial tilt [1], [2]. Days are longer in summer."],
    VACCINES: ["Vaccines expose the immune system to a harmless copy of a pathogen [1]. It then makes antibodies and "
               "memory cells [2].",
               "Vaccines train the immune system with a harmless piece of a pathogen [1][2].",
               "Not enough information to answer the question."],
    SKY: ["The sky is blue because air scatters blue light more than red light [1]. Blue light has a shorter "
          "wavelength [4].",
          "Rayleigh scattering makes the sky blue. Sunsets are red for the same reason.",
          "Air molecules scatter blue sunlight [1][4]. The ocean is large [3]."],
    WATER: ["Water boils at 100 degrees Celsius at sea level [1]. At altitude it boils at a lower temperature [2].",
            "Water boils at 100 degrees Celsius [1]. Ice floats [3]. It boils at 212 degrees Fahrenheit [7]."],
}


def write_answers(path: Path) -> None:
    """vectara's CSV layout: one row per passage, the answer on each run's first row."""
    rows = []
    for number, (query, passages) in enumerate(PASSAGES.items(), start=1):
        for run, answer in enumerate(ANSWERS[query], start=1):
            for i, passage in enumerate(passages, start=1):
                rows.append({"query_id": f"q{number}", "query": query, "query_run": run, "passage_id": f"[{i}]",
                             "passage": passage, "generated_answer": answer if i == 1 else ""})
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def make_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--no-deps", WHEEL], check=True)
        subprocess.run([*pip, *IMPORTS], check=True)
    return python


def record(python: Path, out: Path) -> tuple[int, int]:
    out.mkdir(parents=True, exist_ok=True)
    answers = out / "answers.csv"
    write_answers(answers)
    with RecordingJudge() as judge:
        # -I: neither PYTHONPATH nor this checkout (our package has its import name) reaches its interpreter
        subprocess.run([str(python), "-I", str(ROOT / "bench" / "vectara_reference_driver.py"), str(answers),
                        judge.base_url, str(out / "results.json")], check=True)
        counts = Counter(json.dumps(body, sort_keys=True, ensure_ascii=False) for body in judge.bodies)
    with (out / "requests.jsonl").open("w", encoding="utf-8") as handle:
        for body in sorted(counts):
            handle.write(json.dumps({"count": counts[body], "body": json.loads(body)}, ensure_ascii=False) + "\n")
    queries = len(json.loads((out / "results.json").read_text(encoding="utf-8"))["queries"])
    return sum(counts.values()), queries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/vectara-0.3.0-venv"), help="its virtualenv")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "reference_vectara")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sent, queries = record(make_venv(args.venv), args.out)
    log.info("vectara 0.3.0: %d requests for %d queries recorded in %s", sent, queries, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
