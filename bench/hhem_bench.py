"""HHEM throughput on CPU: items/s through HallucinationMetric.score for batch sizes 1, 8, 32.

Models: the tiny test model; a random model of flan-t5-base's dimensions (HHEM's compute, meaningless
scores); the real HHEM-2.1-open when its weights are found (--model-path, else the Hugging Face cache).
An item = one RAG output: 5 passages of ~60 words and a ~30-word answer.

    python bench/hhem_bench.py [--items 64] [--batch-sizes 1 8 32] [--threads N] [--skip-base]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from open_rag_eval.core.errors import ModelUnavailable
from open_rag_eval.hhem.loader import ModelSpec, resolve_model_dir
from open_rag_eval.hhem.tiny import BASE_DIMS, TINY_WORDS, write_tiny_hhem
from open_rag_eval.metrics.hallucination import HallucinationMetric, HallucinationOptions
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput


def words(n: int, offset: int) -> str:
    return " ".join(TINY_WORDS[(offset + 7 * i) % len(TINY_WORDS)] for i in range(n))


def items(n: int) -> list[RAGOutput]:
    return [
        RAGOutput(
            query_id=f"q{i}", query="q",
            passages=tuple(Passage(id=str(j), text=words(60 + 3 * j + i % 5, i + j)) for j in range(5)),
            answer=(AnswerPart(text=words(30 + i % 7, i)),),
        )
        for i in range(n)
    ]


def measure(options: HallucinationOptions, outputs: list[RAGOutput]) -> float:
    metric = HallucinationMetric(options)
    asyncio.run(metric.score(outputs[:2]))  # load the model and warm up
    started = time.perf_counter()
    result = asyncio.run(metric.score(outputs))
    elapsed = time.perf_counter() - started
    failed = [s.error for s in result.scores if s.error]
    if failed:
        raise SystemExit(f"benchmark items failed: {failed[0]}")
    return len(outputs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--skip-base", action="store_true")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.items} items, CPU")
    with tempfile.TemporaryDirectory() as tmp:
        models = {"tiny (2 layers, d=32)": HallucinationOptions(model_path=str(write_tiny_hhem(Path(tmp) / "tiny")))}
        if not args.skip_base:
            base = write_tiny_hhem(Path(tmp) / "base", dims=BASE_DIMS)
            models["random flan-t5-base dims"] = HallucinationOptions(model_path=str(base))
        real = ModelSpec(model_path=args.model_path)
        try:
            resolve_model_dir(real)
            models["HHEM-2.1-open"] = HallucinationOptions(model_path=args.model_path, tokenizer=args.tokenizer)
        except ModelUnavailable:
            print("HHEM-2.1-open: weights not present, skipped")
        outputs = items(args.items)
        for name, options in models.items():
            for batch_size in args.batch_sizes:
                tuned = options.model_copy(update={"batch_size": batch_size, "device": "cpu"})
                print(f"{name:28s} batch {batch_size:3d}: {measure(tuned, outputs):8.1f} items/s")


if __name__ == "__main__":
    main()
