"""The ``consistency`` evaluator: how much a system's answers and scores move between runs of the same query.

Per query (rows with ``run = None``):
- ``consistency.rouge1|rouge2|rougeL|rougeLsum``: mean ROUGE F1 over each unordered pair of runs (with
  ``rouge.measures`` also ``..._precision`` / ``..._recall``, the earlier run of a pair being the reference);
- ``consistency.bertscore_f1``: mean BERTScore F1 over the same pairs;
- ``consistency.<metric>.<stat>``: the ``stats`` (default mean, median, std, cv, iqr, min, max; also variance,
  range, cai) of every numeric per-run metric of the evaluators before this one (or of a results directory), across
  runs; std and variance divide by n - ``ddof``;
- ``consistency.judge.<type>.flip_rate|alpha|crossing`` (``judge_repeats > 1``): the judge's test-retest noise on
  the same outputs, so judge noise can be told apart from system instability (module ``retest``), for the
  judgments of the evaluators named by ``retest`` (trec, generation). These need one run only, so they are not
  skipped with the query.

``min_runs`` defaults to 2 because it is the least number of runs for which any of these is defined (one pair, a
sample standard deviation); queries with fewer answered runs get rows that say they were skipped and why. Raise it
for steadier per-query spreads. Runs whose output is an error (the system did not answer) are not answers and do
not count as runs here; they are listed in the details.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from open_rag_eval.core.errors import InputError, MissingDependency, ModelUnavailable
from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Plan, Read
from open_rag_eval.evaluators.retest import PREFIX as RETEST_PREFIX
from open_rag_eval.evaluators.retest import RETEST, RETEST_STATS, Labeller, judge_retest, labellers, retest_kinds
from open_rag_eval.metrics.similarity import (
    BertScoreOptions,
    BertScores,
    RougeOptions,
    bertscore_pairs,
    pairs,
    rouge_both_ways,
    rouge_pairs,
    split_sentences,
)
from open_rag_eval import profiles
from open_rag_eval.core.segment import between_markers
from open_rag_eval.scoring.dispersion import ALL_STATS, STATS, dispersion
from open_rag_eval.core.types import (
    AnswerPart,
    Detail,
    EvalResult,
    Passage,
    RAGOutput,
    Score,
)

__all__ = ["BERTSCORE_CHUNK_PAIRS", "RETEST", "ConsistencyEvaluator", "ConsistencyOptions", "bertscore_chunks",
           "bertscore_texts", "compared_runs", "load_results_dir"]

log = logging.getLogger(__name__)

PREFIX = "consistency"
BERTSCORE_CHUNK_PAIRS = 256  # pairs of whole queries scored in one bert-score call


class ConsistencyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: profiles.ProfileName = profiles.DEFAULT  # fills the options not given (docs/profiles.md)
    min_runs: int = Field(2, ge=2)
    metrics: list[Literal["rouge", "bertscore", "dispersion"]] = ["rouge", "bertscore", "dispersion"]
    rouge: RougeOptions = RougeOptions()
    bertscore: BertScoreOptions = BertScoreOptions()
    dispersion_of: list[str] | Literal["all numeric"] = "all numeric"
    results_dir: str | None = None  # evaluate a finished run's results.json instead of the given outputs
    judge_repeats: int = Field(1, ge=1, le=50)
    trec: dict[str, Any] = {}  # options of the trec evaluator used for re-judging (its own defaults when empty)
    retest: list[Literal["trec", "generation", "criteria"]] = Field(
        default_factory=lambda: list[Literal["trec", "generation", "criteria"]](["trec"]), min_length=1)
    generation: dict[str, Any] = {}  # options of the generation evaluator used for re-judging (its defaults when empty)
    stats: list[Literal[ALL_STATS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(STATS), min_length=1)
    ddof: Literal[0, 1] = 1  # std and variance: 1 sample (n - 1), 0 population (n)

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        return profiles.apply("consistency", data)

    @field_validator("retest")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("generation")
    @classmethod
    def _generation_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Checked when the config is read, not when re-judging starts; an error names the field inside."""
        from open_rag_eval.evaluators.generation import GenerationOptions  # noqa: PLC0415

        try:
            GenerationOptions.model_validate(value)
        except ValidationError as error:
            raise ValueError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())) from None
        return value


class ConsistencyEvaluator:
    name: ClassVar[str] = "consistency"
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("results_dir",)  # resolved against the config's folder
    Options: ClassVar[type[BaseModel]] = ConsistencyOptions

    def __init__(self, options: ConsistencyOptions) -> None:
        self.options = options
        self.needs_judge = options.judge_repeats > 1
        # BERTScore of ``bertscore_chunks`` scored elsewhere (a Ray model stage), one F1 a pair in their order, or
        # the reason the model could not score them; None: scored here
        self.bertscored: BertScores | str | None = None

    def contract(self) -> Contract:
        """Query by query, so a run may be evaluated in windows of whole queries when every query has at least
        ``min_runs`` answered runs: a skipped query's results come before every compared query's in a whole run,
        which windows would not keep. Not when it reads its own results folder, nor with BERTScore (its model
        batches span queries: a run's whole batches keep its scores). ROUGE, BERTScore and re-judging read the
        answers; the spread reads the scores of the evaluators before it."""
        options = self.options
        safe = options.results_dir is None and "bertscore" not in options.metrics and self.bertscored is None
        texts = [m for m in ("rouge", "bertscore") if m in options.metrics]
        retest = retest_kinds(options.retest, options.generation) if self.needs_judge else []
        reads: set[Read] = {"runs"}
        reads |= {"answer"} if texts or retest else set()
        reads |= {"scores"} if "dispersion" in options.metrics else set()
        reads |= {"results"} if options.results_dir is not None else set()
        return Contract(reads=frozenset(reads), answer_metrics=(*texts, *(["judge_repeats"] if retest else [])),
                        needs_judge=self.needs_judge, judge_tasks=tuple(retest),
                        window_runs=options.min_runs if safe else None,
                        model_metrics=("bertscore",) if "bertscore" in texts and options.results_dir is None else (),
                        model_scores=self.take_bertscores)

    def take_bertscores(self, scored: BertScores | str) -> None:
        """The BERTScore of ``bertscore_chunks`` scored outside (a Ray run's model stage), or the reason the model
        could not score them: ``Contract.model_scores``."""
        self.bertscored = scored

    def forget(self) -> None:
        """Nothing of a window is kept."""

    @classmethod
    def metric_names(cls, options: ConsistencyOptions, before: Sequence[str] = ()) -> list[str] | None:
        """Every metric these options can produce after evaluators producing ``before`` (config checks name them);
        None when that depends on a results folder read at run time."""
        spread_all = "dispersion" in options.metrics and options.dispersion_of == "all numeric"
        if options.results_dir is not None and spread_all:
            return None
        names = [f"{PREFIX}.{name}" for name in options.rouge.names()] if "rouge" in options.metrics else []
        if "bertscore" in options.metrics:
            names.append(f"{PREFIX}.bertscore_f1")
        if "dispersion" in options.metrics:
            spread = (list(options.dispersion_of) if options.dispersion_of != "all numeric"
                      else [m for m in before if not m.startswith(f"{PREFIX}.")])
            names += [f"{PREFIX}.{m}.{s}" for m in spread for s in options.stats]
        if options.judge_repeats > 1:
            names += [f"{RETEST_PREFIX}.{kind}.{stat}" for kind in retest_kinds(options.retest, options.generation)
                      for stat in RETEST_STATS]
        return names

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        """Judge test-retest, rehearsed: every answered output re-judged ``judge_repeats`` times through the trec
        evaluator of ``evaluators`` (its planned nugget lists reused), else one built from the ``trec`` options, and
        with ``retest: [.., generation]`` through a generation evaluator built from the ``generation`` options."""
        if not self.needs_judge:
            return Plan()
        from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync  # noqa: PLC0415

        if self.options.results_dir is not None:
            outputs, _ = load_results_dir(Path(self.options.results_dir).expanduser())
        answered = {qid: [o for o in runs if o.error is None] for qid, runs in _group(outputs).items()}
        answered = {qid: runs for qid, runs in answered.items() if runs}
        judge = RehearsalJudge()
        ctx = Context(judge=judge, evaluators=list(evaluators))
        found = labellers(ctx, self.options.retest, self.options.trec, self.options.generation)
        run_sync(judge_retest(answered, ctx, {qid: {} for qid in answered}, self.options.judge_repeats, found))
        reasks: dict[str, int] = {}
        for declared, _ in found.values():
            reasks.update(declared.reasks)
        note = (f"consistency: re-judges {sum(map(len, answered.values()))} outputs {self.options.judge_repeats} "
                f"times ({', '.join(self.options.retest)} judgments; samples 0..r-1; sample 0 is the evaluator's own "
                "judgment, counted once)")
        return Plan(notes=[note], requests=judge.requests, reasks=reasks)

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        previous = ctx.previous.scores
        if self.options.results_dir is not None:
            outputs, previous = load_results_dir(Path(self.options.results_dir).expanduser())
        groups = _group(outputs)
        usable = {qid: [o for o in runs if o.error is None] for qid, runs in groups.items()}
        kept = compared_runs(outputs, self.options.min_runs)
        result = EvalResult()
        details: dict[str, dict[str, Any]] = {qid: _base_detail(groups[qid], self.options.min_runs) for qid in groups}
        names = self._metric_names(previous)
        for qid, detail in details.items():
            if qid not in kept:
                reason = detail["skipped"]
                result.scores.extend(Score(query_id=qid, run=None, metric=m, error=reason) for m in names)
        if "rouge" in self.options.metrics:
            ctx.progress("ROUGE", 0)
            result.scores.extend(self._rouge(kept, details))
        if "bertscore" in self.options.metrics:
            ctx.progress("model BERTScore", 0)
            result.scores.extend(await self._bertscore(kept, details))
            ctx.progress("model BERTScore done", 0)
        if "dispersion" in self.options.metrics:
            ctx.progress("spread across runs", 0)
            result.scores.extend(self._dispersion(kept, previous, details))
        if self.needs_judge:  # judge noise needs no second system run: every answered output is re-judged
            ctx.progress("re-judging (test-retest)", 0)
            answered = {qid: runs for qid, runs in usable.items() if runs}
            result.scores.extend(await self._judge_retest(answered, ctx, details))
        result.details.extend(Detail(query_id=q, run=None, section=PREFIX, data=d) for q, d in details.items())
        ctx.progress("outputs", len(outputs))
        return result

    # ------------------------------------------------------------ metric families

    def _metric_names(self, previous: Sequence[Score]) -> list[str]:
        names: list[str] = []
        if "rouge" in self.options.metrics:
            names += [f"{PREFIX}.{name}" for name in self.options.rouge.names()]
        if "bertscore" in self.options.metrics:
            names.append(f"{PREFIX}.bertscore_f1")
        if "dispersion" in self.options.metrics:
            names += [f"{PREFIX}.{m}.{s}" for m in self._dispersed(previous) for s in self.options.stats]
        return names  # judge test-retest rows are not skipped with the query: they need only one run

    def _rouge(self, kept: dict[str, list[RAGOutput]], details: dict[str, dict[str, Any]]) -> list[Score]:
        try:
            return self._rouge_scores(kept, details)
        except MissingDependency as error:  # its package is not installed: unavailable, said once, the run goes on
            log.error("consistency ROUGE is missing for every query: %s", error)
            return [Score(query_id=qid, run=None, metric=f"{PREFIX}.{name}", error=str(error))
                    for qid in kept for name in self.options.rouge.names()]

    def _rouge_scores(self, kept: dict[str, list[RAGOutput]], details: dict[str, dict[str, Any]]) -> list[Score]:
        scores: list[Score] = []
        for qid, runs in kept.items():
            by_pair = rouge_pairs([_sentences(o) for o in runs], self.options.rouge) \
                if self.options.rouge.implementation == "rouge_score" \
                else rouge_both_ways([_peer_text(o) for o in runs])
            usable = {pair: values for pair, values in by_pair.items() if _answered(runs[pair[0]], runs[pair[1]])}
            for (i, j), values in by_pair.items():
                if (i, j) in usable:
                    _pair_entry(details[qid], runs, i, j).update(values)
            for name in self.options.rouge.names():
                metric = f"{PREFIX}.{name}"
                if not usable:
                    scores.append(Score(query_id=qid, run=None, metric=metric, error="every pair has an empty answer"))
                    continue
                value = sum(values[name] for values in usable.values()) / len(usable)
                scores.append(Score(query_id=qid, run=None, metric=metric, value=value))
        return scores

    async def _bertscore(self, kept: dict[str, list[RAGOutput]], details: dict[str, dict[str, Any]]) -> list[Score]:
        metric = f"{PREFIX}.bertscore_f1"
        if not kept:
            return []
        chunks = bertscore_chunks(kept)
        try:
            scored = self.bertscored if self.bertscored is not None else await self._score(kept, chunks)
            if isinstance(scored, str):
                raise ModelUnavailable(scored)
        except (ModelUnavailable, MissingDependency) as error:
            log.error("consistency.bertscore_f1 is missing for every query: %s", error)
            return [Score(query_id=qid, run=None, metric=metric, error=str(error)) for qid in kept]
        todo = [pair for chunk in chunks for pair in chunk]
        if len(scored.f1) != len(todo):
            raise AssertionError(f"BERTScore: {len(scored.f1)} scores for {len(todo)} pairs")
        per_query: dict[str, list[float]] = defaultdict(list)
        for (qid, i, j), value in zip(todo, scored.f1):
            per_query[qid].append(value)
            _pair_entry(details[qid], kept[qid], i, j)["bertscore_f1"] = value
        info = {"model": scored.model, "num_layers": scored.num_layers, "lang": self.options.bertscore.lang,
                "rescaled": scored.rescaled}
        scores = []
        for qid in kept:
            details[qid]["bertscore"] = info
            values = per_query.get(qid)
            if values:
                scores.append(Score(query_id=qid, run=None, metric=metric, value=sum(values) / len(values)))
            else:
                scores.append(Score(query_id=qid, run=None, metric=metric, error="every pair has an empty answer"))
        return scores

    async def _score(self, kept: dict[str, list[RAGOutput]], chunks: list[list[tuple[str, int, int]]]) -> BertScores:
        """Every chunk scored in this process, one bert-score call each (no chunk: the model's description)."""
        parts = [await bertscore_pairs(bertscore_texts(kept, chunk), self.options.bertscore) for chunk in chunks] \
            or [await bertscore_pairs([], self.options.bertscore)]
        return BertScores([f for part in parts for f in part.f1], parts[0].model, parts[0].num_layers,
                          parts[0].rescaled)

    def _dispersed(self, previous: Sequence[Score]) -> list[str]:
        if self.options.dispersion_of != "all numeric":
            return list(self.options.dispersion_of)
        seen = {s.metric for s in previous if s.run is not None and s.value is not None}
        return sorted(m for m in seen if not m.startswith(f"{PREFIX}."))

    def _dispersion(
        self, kept: dict[str, list[RAGOutput]], previous: Sequence[Score], details: dict[str, dict[str, Any]]
    ) -> list[Score]:
        rows: dict[tuple[str, str], dict[int, Score]] = defaultdict(dict)
        for score in previous:
            if score.run is not None:
                rows[(score.query_id, score.metric)][score.run] = score
        known = {metric for _, metric in rows}
        scores: list[Score] = []
        for metric in self._dispersed(previous):
            if metric not in known:
                log.warning("consistency: no per-run rows of '%s' to measure its spread (is its evaluator listed "
                            "before consistency?)", metric)
            for qid, runs in kept.items():
                per_run = rows.get((qid, metric), {})
                scores.extend(self._spread(qid, metric, runs, per_run, details[qid]))
        return scores

    def _spread(
        self, qid: str, metric: str, runs: list[RAGOutput], per_run: dict[int, Score], detail: dict[str, Any]
    ) -> list[Score]:
        present = [(o.run, per_run[o.run].value) for o in runs if o.run in per_run and per_run[o.run].value is not None]
        failed = [o.run for o in runs if o.run in per_run and per_run[o.run].value is None]
        detail.setdefault("dispersion", {})[metric] = {
            "runs": [run for run, _ in present], "values": [value for _, value in present], "failed_runs": failed}
        names = [f"{PREFIX}.{metric}.{stat}" for stat in self.options.stats]
        if len(present) < self.options.min_runs:
            reason = (f"{len(present)} of {len(runs)} runs have a value of {metric} "
                      f"(min_runs {self.options.min_runs})")
            return [Score(query_id=qid, run=None, metric=name, error=reason) for name in names]
        stats = dispersion([value for _, value in present if value is not None], self.options.ddof)
        return [_stat_score(qid, name, stat, stats[stat]) for name, stat in zip(names, self.options.stats)]

    # ------------------------------------------------------------ judge test-retest

    async def _judge_retest(
        self, kept: dict[str, list[RAGOutput]], ctx: Context, details: dict[str, dict[str, Any]],
        labeller: Labeller | None = None,
    ) -> list[Score]:
        found = labellers(ctx, self.options.retest, self.options.trec, self.options.generation, trec=labeller)
        return await judge_retest(kept, ctx, details, self.options.judge_repeats, found)


# ---------------------------------------------------------------- helpers


def compared_runs(outputs: Sequence[RAGOutput], min_runs: int) -> dict[str, list[RAGOutput]]:
    """Per query (first-seen order) its answered runs in run order, for the queries with at least ``min_runs``."""
    usable = {qid: [o for o in runs if o.error is None] for qid, runs in _group(outputs).items()}
    return {qid: runs for qid, runs in usable.items() if len(runs) >= min_runs}


def bertscore_chunks(kept: dict[str, list[RAGOutput]]) -> list[list[tuple[str, int, int]]]:
    """The run's BERTScore batches: every pair (query, i, j) with an answer (a query's pairs in order, queries in
    first-seen order), in chunks of whole queries of up to ``BERTSCORE_CHUNK_PAIRS`` pairs (a query with more is a
    chunk of its own). One bert-score call scores one chunk: padding in a batch moves a float32 score in its last
    bits, so the batches are fixed by the outputs alone, and a local run, a Ray model stage and a merge of shards
    score exactly the same ones."""
    chunks: list[list[tuple[str, int, int]]] = [[]]
    for qid, runs in kept.items():
        mine = [(qid, i, j) for i, j in pairs(len(runs)) if _answered(runs[i], runs[j])]
        if chunks[-1] and len(chunks[-1]) + len(mine) > BERTSCORE_CHUNK_PAIRS:
            chunks.append([])
        chunks[-1].extend(mine)
    return [chunk for chunk in chunks if chunk]


def bertscore_texts(kept: dict[str, list[RAGOutput]], chunk: Sequence[tuple[str, int, int]]) -> list[tuple[str, str]]:
    """The answer texts of a chunk's pairs."""
    return [(_text(kept[qid][i]), _text(kept[qid][j])) for qid, i, j in chunk]


def _stat_score(qid: str, name: str, stat: str, value: float | None) -> Score:
    if value is not None:
        return Score(query_id=qid, run=None, metric=name, value=value)
    reason = "cv is undefined: the mean is 0" if stat == "cv" else f"{stat} is undefined for these values"
    return Score(query_id=qid, run=None, metric=name, error=reason)


def _group(outputs: Sequence[RAGOutput]) -> dict[str, list[RAGOutput]]:
    groups: dict[str, list[RAGOutput]] = {}
    for output in outputs:
        groups.setdefault(output.query_id, []).append(output)
    return {qid: sorted(runs, key=lambda o: o.run) for qid, runs in groups.items()}


def _base_detail(runs: list[RAGOutput], min_runs: int) -> dict[str, Any]:
    answered = [o.run for o in runs if o.error is None]
    failed = [{"run": o.run, "error": o.error} for o in runs if o.error is not None]
    skipped = None
    if len(answered) < min_runs:
        skipped = f"skipped: {len(answered)} answered run(s), min_runs is {min_runs}"
        if failed:
            skipped += f" ({len(failed)} run(s) failed)"
    return {"runs": answered, "failed_runs": failed, "skipped": skipped, "pairs": []}


def _pair_entry(detail: dict[str, Any], runs: list[RAGOutput], i: int, j: int) -> dict[str, Any]:
    key = [runs[i].run, runs[j].run]
    for entry in detail["pairs"]:
        if entry["runs"] == key:
            return entry  # type: ignore[no-any-return]
    entry = {"runs": key}
    detail["pairs"].append(entry)
    return entry


def _text(output: RAGOutput) -> str:
    return output.plain_answer or output.answer_text


def _peer_text(output: RAGOutput) -> str:
    """The answer as vectara's consistency ROUGE reads it: its statements (``between_markers``) joined by spaces."""
    if not output.answer_text.strip():
        return output.plain_answer
    return " ".join(part.text for part in between_markers(output.answer_text, [p.id for p in output.passages])).strip()


def _sentences(output: RAGOutput) -> list[str]:
    if output.answer:
        return [part.text for part in output.answer]
    return split_sentences(output.answer_text)


def _answered(first: RAGOutput, second: RAGOutput) -> bool:
    """A pair counts unless both answers are empty (ROUGE of two empty texts would say 0, which is not true)."""
    return bool(_text(first).strip() or _text(second).strip())


def load_results_dir(folder: Path) -> tuple[list[RAGOutput], list[Score]]:
    """The outputs and per-run scores of a finished run's ``results.json``, read as a stream (``store.json_items``):
    memory holds the outputs and their scores, never the file's text or its whole JSON tree."""
    from open_rag_eval.store.json_items import read_items

    path = folder / "results.json" if folder.is_dir() else folder
    try:
        path.open("rb").close()
    except OSError as error:
        raise InputError(f"cannot read results: {error.strerror}", file=str(path)) from None
    outputs: list[RAGOutput] = []
    scores: list[Score] = []

    def on_item(section: str, entry: dict[str, Any]) -> None:
        if section != "outputs":
            return
        try:
            output = _output_of(entry)
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"outputs[{len(outputs)}] is malformed: {error}", file=str(path)) from None
        outputs.append(output)
        scores.extend(_scores_of(output, entry))

    sections: set[str] = set()
    try:
        read_items(path, on_item, sections)
    except InputError as error:
        if error.problem.startswith("outputs["):
            raise
        raise InputError(f"not a results.json written by open-rag-eval ({error.problem})", file=str(path)) from None
    if "outputs" not in sections:
        raise InputError("not a results.json written by open-rag-eval (no 'outputs' list)", file=str(path))
    return outputs, scores


def _scores_of(output: RAGOutput, entry: dict[str, Any]) -> list[Score]:
    scores = []
    for metric, value in (entry.get("scores") or {}).items():
        if value is not None:
            scores.append(Score(query_id=output.query_id, run=output.run, metric=metric, value=float(value)))
        else:
            reason = (entry.get("errors") or {}).get(metric) or "missing in results.json"
            scores.append(Score(query_id=output.query_id, run=output.run, metric=metric, error=str(reason)))
    return scores


def _output_of(entry: dict[str, Any]) -> RAGOutput:
    answer = tuple(AnswerPart(text=p["text"], citations=tuple(p.get("citations") or ()))
                   for p in entry.get("answer") or ())
    passages = tuple(Passage(id=str(p["id"]), text=p.get("text", "")) for p in entry.get("passages") or ())
    return RAGOutput(query_id=str(entry["query_id"]), query=entry.get("query", ""), run=int(entry.get("run") or 1),
                     passages=passages, answer=answer, answer_text=entry.get("answer_text") or "",
                     error=entry.get("error"))

