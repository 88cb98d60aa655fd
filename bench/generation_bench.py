"""Judge calls and prompt tokens per output of the generation metrics, next to what ragas would send.

    python bench/generation_bench.py [--queries 20] [--passages 5] [--reference-sentences 4] [--seed 0]

Ours: the ``generation`` evaluator runs in-process against the simulated judge's answering function (no sockets), on
``judge_bench``'s synthetic data (per query: passages of seven 14-word sentences, an answer of seven cited
sentences) plus a reference answer of ``--reference-sentences`` sentences taken from the relevant passages. Every
request is recorded; prompt tokens are ``open_rag_eval.judge.tokens.chat_tokens`` of its messages (the estimate the
simulated judge reports and --dry-run plans with). Each metric is run alone (its own cost), then all together (what
the shared claim extraction saves).

ragas: counted from its documented algorithm (ragas 0.3, ``src/ragas/metrics/collections`` and
``src/ragas/prompt/metrics``), not run: per output,

    faithfulness        2 calls: statement generation (question, answer) + one NLI call (joined contexts, statements)
    context precision   1 call per retrieved passage (question, passage, answer or reference), per variant
    context recall      1 call (question, joined contexts, reference)
    context relevance   2 calls (two judge prompts; question, joined contexts)
    answer correctness  3 calls: statement generation for the answer and for the reference, one TP/FP/FN
                        classification (question, both statement lists); + 1 embedding call for the similarity part
    answer relevancy    3 calls (strictness 3: the question-generation prompt once per question; the answer)
                        + embeddings of the question and the 3 generated questions
    answer similarity   no call (2 embeddings)
    rubric judges       ragas has none; we compare with one call grading all five rubrics

Each ragas prompt is its fixed part (instruction, JSON schema of the reply, few-shot examples) plus its input as the
JSON ragas renders (``model_dump_json(indent=4)``). The fixed parts below were token-counted with the same estimator
from ragas's source text; the statements ragas would extract are taken to be the claims our simulated judge
extracts (the same number and text), so the inputs are compared like for like.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_bench import make_rows  # noqa: E402

from open_rag_eval.evaluators.base import Context  # noqa: E402
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions  # noqa: E402
from open_rag_eval.judge.base import Completion, JudgeRequest  # noqa: E402
from open_rag_eval.judge.sim_answer import reply  # noqa: E402
from open_rag_eval.judge.tokens import chat_tokens, count_tokens  # noqa: E402
from open_rag_eval.core.types import Labels, Passage, RAGOutput  # noqa: E402

# Fixed prompt parts of ragas 0.3, in tokens (instruction + "return JSON" text + reply schema + few-shot examples +
# separators), from: faithfulness/util.py StatementGeneratorPrompt and NLIStatementPrompt @ 44ca4a24,
# _context_precision.py ContextPrecisionPrompt @ 0413a111, prompt/metrics/context_recall.py @ e39b8e0f,
# prompt/metrics/context_relevance.py @ 47d9f1ee, _answer_correctness.py CorrectnessClassifier @ 05835a00.
RAGAS_FIXED = {"statement_generation": 377, "nli_statements": 725, "context_precision": 883, "context_recall": 638,
               "context_relevance_1": 196, "context_relevance_2": 194, "correctness_classifier": 1210,
               "answer_relevancy": 237}  # prompt/metrics/answer_relevance.py answer_relevancy_prompt
PER_CALL = 7  # chat_tokens: 4 per message (one user message) + 3 per request
METRICS = ("faithfulness", "context_precision", "context_recall", "context_relevance", "answer_correctness")
RUBRIC_METRICS = ("rubric",)
ANSWER_METRICS = ("answer_relevance", "answer_similarity")  # ragas has no rubric judges; compared with one call grading all five instead


class RecordingJudge:
    """The simulated judge's answers, in process; records every request."""

    model = "simulated-judge"
    simulated = True

    def __init__(self) -> None:
        self.requests: list[JudgeRequest] = []
        self.planning = False

    async def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        return Completion(text=reply(request.messages).text)


def make_outputs(n_queries: int, n_passages: int, reference_sentences: int, seed: int) -> list[RAGOutput]:
    rng = random.Random(seed)
    by_query: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in make_rows(n_queries, n_passages, seed):
        by_query[row["query_id"]].append(row)
    outputs = []
    for query_id, rows in by_query.items():
        sentences = [s.strip() + "." for r in rows for s in r["passage"].split(".") if s.strip()]
        reference = " ".join(rng.sample(sentences, min(reference_sentences, len(sentences))))
        passages = tuple(Passage(id=r["passage_id"].strip("[]"), text=r["passage"]) for r in rows)
        outputs.append(RAGOutput(query_id=query_id, query=rows[0]["query"], passages=passages,
                                 answer_text=rows[0]["generated_answer"], labels=Labels(reference_answer=reference)))
    return outputs


def ours(outputs: Sequence[RAGOutput], metrics: Sequence[str], **extra: object) -> tuple[float, float, dict[str, int]]:
    """(calls per output, prompt tokens per output, calls per task) of our evaluator with these metrics."""
    judge = RecordingJudge()
    options = GenerationOptions(metrics=list(metrics), **extra)  # type: ignore[arg-type]
    if "answer_relevance" in metrics or "answer_similarity" in metrics:
        judge.planning = True  # count the judge's work only: no embedding model is loaded
    asyncio.run(GenerationEvaluator(options).evaluate(outputs, Context(judge=judge)))
    tasks: dict[str, int] = defaultdict(int)
    for request in judge.requests:
        tasks[request.task] += 1
    tokens = sum(chat_tokens(content for _, content in r.messages) for r in judge.requests)
    return len(judge.requests) / len(outputs), tokens / len(outputs), dict(tasks)


def _json(value: object) -> int:
    return count_tokens(json.dumps(value, indent=4, ensure_ascii=False))


def _claims(question: str, text: str) -> list[str]:
    """The statements of a text as our simulated judge extracts them (stand-in for ragas's statement generation)."""
    from open_rag_eval.prompts import load  # noqa: PLC0415
    from open_rag_eval.core.segment import segment_answer  # noqa: PLC0415

    parts = segment_answer(text, [])
    prompt = load("generation.claim_extract").render(
        question=question, sentences="\n".join(f"[{i}] {p.text}" for i, p in enumerate(parts, start=1)))
    return [c["claim"] for c in json.loads(reply([("user", prompt)]).text)["claims"]]


def ragas(output: RAGOutput) -> dict[str, tuple[int, int]]:
    """metric -> (calls, prompt tokens) ragas would send for this output (see the module docstring)."""
    q, answer, reference = output.query, output.plain_answer, output.labels.reference_answer or ""
    contexts = [p.text for p in output.passages]
    joined = "\n".join(contexts)
    statements, ref_statements = _claims(q, answer), _claims(q, reference)
    fixed = RAGAS_FIXED

    def generation(text: str) -> int:
        return fixed["statement_generation"] + _json({"question": q, "answer": text}) + PER_CALL

    faith = generation(answer) + fixed["nli_statements"] + _json({"context": joined, "statements": statements}) \
        + PER_CALL
    precision = sum(fixed["context_precision"] + _json({"question": q, "context": c, "answer": answer}) + PER_CALL
                    for c in contexts)
    precision_ref = sum(fixed["context_precision"] + _json({"question": q, "context": c, "answer": reference})
                        + PER_CALL for c in contexts)
    recall = fixed["context_recall"] + sum(count_tokens(json.dumps(v)) for v in (q, joined, reference)) + PER_CALL
    relevance = sum(fixed[k] + count_tokens(json.dumps(q)) + count_tokens(json.dumps(joined)) + PER_CALL
                    for k in ("context_relevance_1", "context_relevance_2"))
    correctness = generation(answer) + generation(reference) + fixed["correctness_classifier"] + _json(
        {"question": q, "answer": statements, "ground_truth": ref_statements}) + PER_CALL
    relevancy = 3 * (fixed["answer_relevancy"] + count_tokens(json.dumps(answer)) + PER_CALL)
    n = len(contexts)
    return {"answer_relevance": (3, relevancy), "answer_similarity": (0, 0),"faithfulness": (2, faith), "context_precision": (2 * n, precision + precision_ref),
            "context_recall": (1, recall), "context_relevance": (2, relevance), "answer_correctness": (3, correctness)}


def rubric_combined(output: RAGOutput) -> int:
    """Prompt tokens of ONE call grading all five rubrics (the alternative to our one call per rubric): the
    citation-accuracy prompt (sources, question, answer) plus the criterion and scale lines of the other four."""
    from open_rag_eval.metrics.rubric import RUBRICS, _cited_answer  # noqa: PLC0415
    from open_rag_eval.prompts import load  # noqa: PLC0415

    numbers = {p.id: i for i, p in enumerate(output.passages, start=1)}
    sources = "\n".join(f"[{i}] {p.text}" for i, p in enumerate(output.passages, start=1))
    base = load("generation.rubric_citation_accuracy").render(question=output.query, sources=sources,
                                                              answer=_cited_answer(output, numbers))
    extra = [line for name in RUBRICS[:-1] for line in load(f"generation.rubric_{name}").text.splitlines()
             if line.startswith(("You grade", "Score the answer"))]
    return chat_tokens(["\n".join([base, *extra])])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument("--reference-sentences", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    outputs = make_outputs(args.queries, args.passages, args.reference_sentences, args.seed)
    theirs: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for output in outputs:
        for metric, (calls, tokens) in ragas(output).items():
            theirs[metric][0] += calls / len(outputs)
            theirs[metric][1] += tokens / len(outputs)
    print(f"{len(outputs)} outputs: {args.passages} passages of ~100 words, answers of 7 cited sentences, references "
          f"of {args.reference_sentences} sentences (seed {args.seed}); per output:")
    print(f"{'metric':22} {'ours calls':>10} {'ours tokens':>12} {'ragas calls':>12} {'ragas tokens':>13}")
    total = [0.0, 0.0]
    for metric in METRICS:
        calls, tokens, tasks = ours(outputs, [metric])
        their_calls, their_tokens = theirs[metric]
        total[0] += their_calls
        total[1] += their_tokens
        detail = ", ".join(f"{task} {n / len(outputs):g}" for task, n in sorted(tasks.items()))
        print(f"{metric:22} {calls:10.2f} {tokens:12.0f} {their_calls:12.2f} {their_tokens:13.0f}   ({detail})")
    for metric in RUBRIC_METRICS:
        calls, tokens, tasks = ours(outputs, [metric])
        combined = sum(rubric_combined(o) for o in outputs) / len(outputs)
        print(f"{metric:22} {calls:10.2f} {tokens:12.0f} {'-':>12} {'-':>13}   (ragas has none; one call for all "
              f"five rubrics instead: 1.00 call, {combined:.0f} tokens)")
    for metric, extra in (("answer_relevance", {"variants": ["embedding"]}), ("answer_relevance", {}),
                          ("answer_similarity", None)):
        calls, tokens, tasks = ours(outputs, [metric], **({metric: extra} if extra is not None else {}))
        their_calls, their_tokens = theirs[metric]
        detail = ", ".join(f"{task} {n / len(outputs):g}" for task, n in sorted(tasks.items())) or "no judge call"
        label = metric + (" (ragas's)" if extra else " (+ judged)" if extra == {} else "")
        print(f"{label:28} {calls:4.2f} {tokens:12.0f} {their_calls:12.2f} {their_tokens:13.0f}   ({detail}; "
              "embeddings not counted)")
    calls, tokens, _ = ours(outputs, METRICS)
    print(f"{'all five together':22} {calls:10.2f} {tokens:12.0f} {total[0]:12.2f} {total[1]:13.0f}   "
          "(ours: claims extracted once and shared; ragas: no sharing across metrics)")
    print("context_precision counts both variants (against the answer and against the reference); ragas's answer "
          "correctness also makes one embedding call per output (not counted)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
