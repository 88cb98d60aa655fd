"""Support of statements by their citations, TREC 2024 protocol (docs/methods.md).

One judge call per (statement, first citation) -- or per citation with ``variant: all_citations``. A citation to a
passage the output does not contain is No Support without a call and counted in ``citation.fabricated``, so a
fabricated citation can never raise the score. Statements without citations count against recall only.
Unparseable labels are excluded and counted (``citation.n_unparsed``); failed calls likewise (``citation.n_failed``).
``citation.n_cited`` (statements with a judged citation) and ``citation.n_unlabelled`` (of those, the ones left out
because no label parsed) say what precision and recall rest on, so a recall of 1.0 built on 1 of 4 statements shows.
Each judgment carries its reply's parse class (docs/judge-health.md);
``parse: strict`` accepts a reply naming exactly one label. ``prompt`` picks the organisers' script wording
(``trec2024_script``, what TREC 2024 ran) or the wording printed in the paper's Fig. 1 (``paper_figure``).
``scoring: per_passage`` computes precision as vectara's open-rag-eval does: the mean over the distinct cited
passages of each passage's mean weight (docs/profiles.md); ``passage_text: text`` shows the judge the passage
without its title.

A trailing Sources section (``Sources:`` or ``References:`` and its entries, under every profile) lists the
answer's sources, not a statement's: support is judged per statement, so its entries are never spread over the
statements. The detail records them (``sources_entries``) and says when they are the answer's only citations
(``sources_only``: every statement then counts as uncited), so a support score of 0 says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import classify_support
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._judging import ask
from open_rag_eval.metrics.structured import ResponseFormat
from open_rag_eval.metrics.structured import params as structured_params
from open_rag_eval.metrics.lexical import sources_entries
from open_rag_eval.prompts import load
from open_rag_eval.scoring.trec import (
    STRICT_SUPPORT_WEIGHTS,
    SUPPORT_WEIGHTS,
    support_scores,
    support_scores_per_passage,
)
from open_rag_eval.core.types import AnswerPart, Detail, Passage, RAGOutput, Score

__all__ = ["CitationJudge", "CitationOptions", "Judgment", "citation_result"]

PROMPTS = {"trec2024_script": "support.trec2024", "paper_figure": "support.paper_figure", "vectara": "support.vectara"}
SYSTEMS = {"vectara": "vectara.parse_system"}  # the organisers' script sends no system message


class CitationOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variant: Literal["first_citation", "all_citations"] = "first_citation"
    prompt: Literal["trec2024_script", "paper_figure", "vectara"] = "trec2024_script"
    parse: Literal["reference", "strict"] = "reference"  # strict: exactly one label named
    scoring: Literal["per_statement", "per_passage"] = "per_statement"  # per_passage: vectara's precision
    passage_text: Literal["title_and_text", "text"] = "title_and_text"  # text: no title (vectara)
    temperature: float = Field(0.1, ge=0, le=2)  # the organisers' script; vectara 0.0
    seed: int | None = None
    response_format: ResponseFormat = "text"  # vectara: its JSON schema (metrics.structured)


@dataclass(frozen=True)
class Judgment:
    passage_id: str
    label: str | None  # FS | PS | NS | None
    status: str  # ok | failed
    fabricated: bool = False
    reason: str | None = None
    unparsed: bool = False  # the judge replied, but with no label
    parse: str | None = field(default=None, compare=False)  # parse class of the reply; None: no judge asked

    def detail(self) -> dict[str, Any]:
        data: dict[str, Any] = {"passage_id": self.passage_id, "label": self.label, "status": self.status,
                                "fabricated": self.fabricated}
        if self.parse is not None:
            data["parse"] = self.parse
        if self.reason:
            data["reason"] = self.reason
        return data


def citation_text(passage: Passage) -> str:
    """``title: segment`` as the organisers' script built it; the segment alone when there is no title."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


@dataclass
class CitationJudge:
    options: CitationOptions = field(default_factory=CitationOptions)

    def judged_citations(self, part: AnswerPart) -> tuple[str, ...]:
        return part.citations[:1] if self.options.variant == "first_citation" else part.citations

    async def judge_output(self, judge: Judge, output: RAGOutput, sample: int = 0) -> list[list[Judgment]]:
        """The judgments of every statement, in answer order; every call runs concurrently."""
        jobs = [[self._judge(judge, part.text, output.passage(pid), pid, sample) for pid in self.judged_citations(part)]
                for part in output.answer]
        flat = await asyncio.gather(*(job for row in jobs for job in row))
        result, position = [], 0
        for row in jobs:
            result.append(list(flat[position:position + len(row)]))
            position += len(row)
        return result

    async def _judge(self, judge: Judge, statement: str, passage: Passage | None, passage_id: str,
                     sample: int) -> Judgment:
        if passage is None:
            return Judgment(passage_id, "NS", "ok", True, "cites a passage the output does not contain")
        template = load(PROMPTS[self.options.prompt])
        shown = citation_text(passage) if self.options.passage_text == "title_and_text" else passage.text
        user = template.render(statement=statement, citation=shown)
        profile, temperature, seed = self.options.parse, self.options.temperature, self.options.seed
        extra = ({} if seed is None else {"seed": seed}) | structured_params(Tasks.SUPPORT,
                                                                             self.options.response_format)
        system = load(SYSTEMS[self.options.prompt]).text if self.options.prompt in SYSTEMS else None
        # vectara's prompt asks for full_support / partial_support / no_support: read as the TREC labels
        words = (lambda text: text.replace("_", " ")) if self.options.prompt == "vectara" else (lambda text: text)
        reply = await ask(
            judge,
            lambda t, s: JudgeRequest.chat(Tasks.SUPPORT, user, system=system, params={"temperature": t, **extra},
                                           prompt_version=template.sha256, sample=s,
                                           priority=Priority.LEAF),
            lambda text: classify_support(words(text), profile), temperatures=(temperature, temperature),
            sample=sample)
        if reply.value is None:
            if reply.status == "failed":
                return Judgment(passage_id, None, "failed", False, reply.reason, parse=reply.parse)
            return Judgment(passage_id, None, "failed", False, f"unparseable reply: {reply.text!r}", unparsed=True,
                            parse=reply.parse)
        return Judgment(passage_id, reply.value, "ok", parse=reply.parse)


UNCITED = "undefined: the answers cite nothing (citation support is undefined without citation markers)"
NO_MARKERS_NOTICE = ("the answers cite nothing (not one citation marker in any answer): citation precision, recall "
                     "and F1 are undefined, not 0. To score citations, mark each statement with the passages it "
                     "rests on: 'Paris is the capital of France [1].' where [1] is the first passage of the answer's "
                     "contexts (or [id] a passage id), or give JSONL statements with their citations "
                     "({\"text\": ..., \"citations\": [id]})")


def cites_nothing(outputs: Sequence[RAGOutput]) -> bool:
    """Whether no answer of ``outputs`` cites anything though some answer has statements (the shape of answers
    written without citation markers)."""
    answered = [o for o in outputs if o.error is None and o.answer and o.answer_text.strip() != "NO_ANSWER"]
    return bool(answered) and not any(part.citations for o in answered for part in o.answer)


def citation_result(output: RAGOutput, judgments: list[list[Judgment]],
                    options: CitationOptions, *, uncited: bool = False) -> tuple[list[Score], Detail]:
    """The citation rows of ``output``; with ``uncited`` (no answer of the run cites anything, ``cites_nothing``)
    precision, recall and F1 are undefined with the reason ``UNCITED``."""
    fabricated = sum(1 for part in output.answer for pid in part.citations if output.passage(pid) is None)
    n_failed = sum(1 for row in judgments for j in row if j.status == "failed" and not j.unparsed)
    values = _scores(judgments, options, SUPPORT_WEIGHTS)
    strict = _scores(judgments, options, STRICT_SUPPORT_WEIGHTS)
    values |= {f"{name}_strict": strict[name] for name in ("precision", "recall", "f1")}
    n_unparsed = int(values["n_unparsed"]) - n_failed
    cited = [row for row in judgments if row]
    names = ("precision", "recall", "f1", "precision_strict", "recall_strict", "f1_strict")
    if uncited:
        scores = [Score.failed(output, f"citation.{name}", UNCITED) for name in names]
    elif cited and not any(j.label is not None for row in cited for j in row):
        reason = f"no citation judgment succeeded: {cited[0][0].reason}"
        scores = [Score.failed(output, f"citation.{name}", reason) for name in names]
    else:
        scores = [Score.ok(output, f"citation.{name}", values[name]) for name in names]
    scores += [Score.ok(output, "citation.fabricated", fabricated), Score.ok(output, "citation.n_unparsed", n_unparsed),
               Score.ok(output, "citation.n_failed", n_failed)]
    # what precision and recall rest on: the cited statements, minus those without any parsed label
    unlabelled = sum(1 for row in cited if not any(j.label is not None for j in row))
    scores += [Score.ok(output, "citation.n_cited", len(cited)), Score.ok(output, "citation.n_unlabelled", unlabelled)]
    statements = [{"text": part.text, "citations": list(part.citations), "judgments": [j.detail() for j in row]}
                  for part, row in zip(output.answer, judgments, strict=True)]
    data: dict[str, Any] = {"variant": options.variant, "prompt": options.prompt, "parse": options.parse,
                            "scoring": options.scoring, "statements": statements}
    listed = answer_sources(output.answer_text)
    if listed:
        data |= {"sources_entries": listed, "sources_only": not any(part.citations for part in output.answer)}
    return scores, Detail(query_id=output.query_id, run=output.run, section="citation", data=data)


def answer_sources(answer_text: str | None) -> list[str]:
    """The entries of the answer's trailing ``Sources:`` (else ``References:``) section; [] when it has none."""
    for header in ("Sources", "References"):
        if entries := sources_entries(answer_text or "", header):
            return entries
    return []


def _scores(judgments: list[list[Judgment]], options: CitationOptions,
            weights: dict[str, float]) -> dict[str, float | int]:
    if options.scoring == "per_passage":
        return support_scores_per_passage([[(j.passage_id, j.label) for j in row] for row in judgments], weights)
    return support_scores([[j.label for j in row] for row in judgments], weights)
