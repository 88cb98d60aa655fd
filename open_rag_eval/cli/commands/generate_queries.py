"""`open-rag-eval generate-queries --corpus DIR|CSV --n N`: a queries CSV (with golden labels) written by the judge."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from open_rag_eval.cli.commands.eval import positive_int

if TYPE_CHECKING:
    from open_rag_eval.generation.corpus import CorpusPassage
    from open_rag_eval.generation.testset import Generated, Outcome
    from open_rag_eval.judge.config import JudgeConfig

log = logging.getLogger("open_rag_eval")

HELP = ("generate a test set: the judge writes one question (optionally a reference answer) per sampled corpus "
        "passage; writes a queries CSV with the source passage ids as golden labels")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, type=Path,
                        help="a folder of .txt/.md files (paragraphs become passages FILE#K) or a CSV id,text[,title]")
    parser.add_argument("--n", required=True, type=positive_int, help="passages to sample (one question each)")
    parser.add_argument("--config", type=Path, help="YAML config whose judge: section is used (default: gpt-4o-mini)")
    parser.add_argument("-o", "--output", type=Path, default=Path("generated_queries.csv"),
                        metavar="FILE", help="queries CSV to write (default: generated_queries.csv)")
    parser.add_argument("--qrels", type=Path, help="also write the labels as a TREC qrels file")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--with-answers", action="store_true", help="also ask for a short reference answer")
    parser.add_argument("--chunk", choices=("paragraph", "file"), default="paragraph",
                        help="in a corpus folder: one passage per paragraph (default) or per file")
    parser.add_argument("--dry-run", action="store_true", help="estimate judge calls, tokens and cost; call nothing")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.config import load_judge_config
    from open_rag_eval.core.errors import InputError
    from open_rag_eval.generation.corpus import read_corpus
    from open_rag_eval.judge.config import JudgeConfig

    for target in (args.output, args.qrels):
        if target is not None and target.resolve() == args.corpus.resolve():
            raise InputError("the output would overwrite the corpus; name another file", file=str(target))
    judge = load_judge_config(args.config) if args.config else JudgeConfig()
    base_dir = args.config.resolve().parent if args.config else Path.cwd()
    passages = read_corpus(args.corpus, args.chunk)
    if args.dry_run:
        _plan(judge, passages, args)
        return 0
    outcome, usage = _generate(judge, base_dir, str(args.config or ""), passages, args)
    if outcome.generated:
        _write(args.output, args.qrels, outcome.generated, args.with_answers)
    log.info("generate-queries: %d passage(s) of %d asked, %d question(s) generated, %d dropped as duplicates, "
             "%d failed%s", outcome.asked, len(passages), len(outcome.generated), outcome.duplicates,
             len(outcome.failures), f"; wrote {args.output}" if outcome.generated else "")
    if usage is not None:
        cost = "unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
        log.info("judge: %d call(s), %d cache hit(s), %d failed call(s), %d prompt + %d completion tokens, cost %s",
                 usage["calls"], usage["cache_hits"], usage["failures"], usage["prompt_tokens"],
                 usage["completion_tokens"], cost)
    if judge.simulated is not None:
        log.warning("note: the simulated judge wrote these questions from word counts; use them for tests only")
    for passage_id, reason in outcome.failures[:5]:
        log.warning("  failed: %s: %s", passage_id, reason)
    if len(outcome.failures) > 5:
        log.warning("  ... and %d more failure(s)", len(outcome.failures) - 5)
    if not outcome.generated:
        log.error("error: no question was generated (%d failed, %d duplicates); nothing written",
                  len(outcome.failures), outcome.duplicates)
        return 6
    return 0


def _generate(judge: JudgeConfig, base_dir: Path, file: str, passages: list[CorpusPassage],
              args: argparse.Namespace) -> tuple[Outcome, dict[str, Any] | None]:
    """The outcome, and the judge's usage (calls, cache hits, failures, tokens, cost) when it keeps accounts."""
    import asyncio

    from open_rag_eval.generation.testset import generate
    from open_rag_eval.run.pipeline import judge_session

    async def main() -> tuple[Outcome, dict[str, Any] | None]:
        async with judge_session(judge, base_dir, file) as client:
            outcome = await generate(client, passages, args.n, args.seed, args.with_answers)
            accounting = getattr(client, "accounting", None)
            return outcome, None if accounting is None else accounting.snapshot()["total"]

    return asyncio.run(main())


def _write(output: Path, qrels: Path | None, generated: list[Generated], with_answers: bool) -> None:
    from open_rag_eval.store.csv_cells import csv_text
    from open_rag_eval.store.fileio import atomic_write_text

    header = ["query_id", "query", "relevant_ids"] + (["reference_answer"] if with_answers else [])
    rows = [[g.query_id, g.query, g.passage_id] + ([g.reference_answer] if with_answers else []) for g in generated]
    atomic_write_text(output, csv_text(header, rows))
    if qrels is not None:
        atomic_write_text(qrels, "".join(f"{g.query_id} 0 {g.passage_id} 1\n" for g in generated))


def _plan(judge: JudgeConfig, passages: list[CorpusPassage], args: argparse.Namespace) -> None:
    from open_rag_eval.generation.testset import generate
    from open_rag_eval.judge.accounting import price_for
    from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync
    from open_rag_eval.cli.terminal import echo

    rehearsal = RehearsalJudge()
    run_sync(generate(rehearsal, passages, args.n, args.seed, args.with_answers))
    calls = list(rehearsal.requests.values())
    prompt = sum(c.prompt_tokens for c in calls)
    completion = sum(c.completion_tokens for c in calls)
    price = price_for(judge.model, judge.prices)
    cost = "unknown (no price for this model)" if price is None else \
        f"${(prompt * price.input + completion * price.output) / 1e6:.4f}"
    echo(f"dry run: {len(passages)} passages in the corpus; nothing was called")
    echo(f"planned judge calls: {len(calls)} (identical requests once; before cache hits)")
    echo(f"estimated tokens: {prompt} prompt, {completion} completion")
    echo(f"estimated cost with {judge.model}: {cost}")
