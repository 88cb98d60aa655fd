"""The project's vocabulary.

``RAGOutput``  one system response to one query in one run.
``Score``      one named number for one (query, run) -- or no number and an ``error``; never a placeholder.
``Detail``     evidence behind scores (grades per passage, nuggets, statement labels), one section per metric.
``EvalResult`` what an evaluator returns: scores and details.

A ``Score`` whose ``run`` is ``None`` describes a query across all of its runs (consistency).
"""

from __future__ import annotations

import json
import sys
import zlib
from typing import Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, model_validator
from pydantic_core import CoreSchema, core_schema

__all__ = ["AnswerPart", "Detail", "EvalResult", "Labels", "Passage", "RAGOutput", "Score"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Passage(_Frozen):
    """A retrieved passage, in retrieval order."""

    id: str
    text: str
    title: str | None = None
    score: float | None = None  # the retriever's score, when the input gives one


class AnswerPart(_Frozen):
    """One statement (sentence) of an answer with the ids of the passages it cites, in order.

    A citation may name a passage that does not exist; metrics count such citations as fabricated.
    """

    text: str
    citations: tuple[str, ...] = ()


class Labels(_Frozen):
    """Optional golden labels of a query (see the README's input reference)."""

    relevant_ids: dict[str, int] | None = None  # id -> grade (1 when ungraded)
    expected_keywords: tuple[str, ...] | None = None
    expected_refusal: bool | None = None
    required_citations: int | None = None
    reference_answer: str | None = None
    grounding_ids: tuple[str, ...] | None = None


class RAGOutput(_Frozen):
    """One system response to one query in one run.

    Plain answer text is always segmented the way input files are (``segment.segment_answer``): given as
    ``answer="text [1]"`` or as ``answer_text`` with no ``answer`` statements, it becomes the statements with
    their citations -- an output built in code scores like the same answer read from a CSV.
    """

    query_id: str
    query: str
    run: int = 1
    passages: tuple[Passage, ...] = ()
    answer: tuple[AnswerPart, ...] = ()
    answer_text: str = ""  # the answer as given, citation markers included
    labels: Labels = Labels()
    latency_ms: float | None = None
    refused: bool | None = None  # the system's own report that it declined to answer, when it gives one
    error: str | None = None  # the system gave no output (e.g. a connector call failed)
    source: str | None = None  # "file:line" the output was read from

    @model_validator(mode="before")
    @classmethod
    def _plain_answer(cls, data: Any) -> Any:
        """``answer`` given as a string is the answer text (segmented by ``_segmented``)."""
        if isinstance(data, dict) and isinstance(data.get("answer"), str):
            data = dict(data)
            text = data.pop("answer")
            if data.get("answer_text") not in (None, text):
                raise ValueError("answer is plain text and answer_text differs from it; give one of them")
            data["answer_text"] = text
        return data

    @model_validator(mode="after")
    def _segmented(self) -> RAGOutput:
        if not self.answer and self.answer_text.strip():
            from open_rag_eval.core.segment import segment_answer  # segment imports this module

            parts = segment_answer(self.answer_text.strip(), [passage.id for passage in self.passages])
            object.__setattr__(self, "answer", parts)  # frozen: set once, while validating
        return self

    @property
    def key(self) -> tuple[str, int]:
        return (self.query_id, self.run)

    def passage(self, passage_id: str) -> Passage | None:
        for passage in self.passages:
            if passage.id == passage_id:
                return passage
        return None

    @property
    def plain_answer(self) -> str:
        """The answer's statements joined by spaces, citation markers removed (what judges read)."""
        return " ".join(part.text for part in self.answer)


class _Record:
    """A frozen record with ``__slots__`` that pydantic models validate from a dict of its fields (or the record
    itself) and dump with ``as_dict``."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a {type(self).__name__} is frozen: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a {type(self).__name__} is frozen: cannot delete {name}")

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.plain_serializer_function_ser_schema(cls.as_dict))

    @classmethod
    def _validate(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        if isinstance(data, dict):
            return cls(**data)
        raise ValueError(f"a {cls.__name__} is built from a {cls.__name__} or a dict, got {type(data).__name__}")


class Score(_Record):
    """One named number for one (query, run), or a missing value with the reason it is missing.

    A small frozen record (``__slots__``, metric names interned): a 10,000-output run holds hundreds of thousands of
    them. Built as ``Score(query_id=..., run=..., metric=..., value=...)``; inside pydantic models (``EvalResult``)
    it validates from and dumps to a dict of those five fields.
    """

    __slots__ = ("query_id", "run", "metric", "value", "error")
    query_id: str
    run: int | None  # None: a per-query score across runs
    metric: str
    value: float | None
    error: str | None

    def __init__(self, *, query_id: str, run: int | None, metric: str, value: float | None = None,
                 error: str | None = None) -> None:
        if (value is None) == (error is None):
            raise ValueError("a Score has exactly one of value and error")
        if not isinstance(query_id, str) or not isinstance(metric, str) or (error is not None and
                                                                            not isinstance(error, str)):
            raise TypeError("a Score's query_id, metric and error are text")
        if run is not None and (isinstance(run, bool) or not isinstance(run, int)):
            raise TypeError(f"a Score's run is a whole number or None, got {run!r}")
        setter = object.__setattr__
        setter(self, "query_id", query_id)
        setter(self, "run", run)
        setter(self, "metric", sys.intern(metric))
        setter(self, "value", None if value is None else float(value))
        setter(self, "error", error)

    @classmethod
    def ok(cls, output: RAGOutput, metric: str, value: float) -> Score:
        return cls(query_id=output.query_id, run=output.run, metric=metric, value=value)

    @classmethod
    def failed(cls, output: RAGOutput, metric: str, error: str) -> Score:
        return cls(query_id=output.query_id, run=output.run, metric=metric, error=error)

    def _fields(self) -> tuple[Any, ...]:
        return (self.query_id, self.run, self.metric, self.value, self.error)

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self.__slots__, self._fields()))

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Score) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Score(" + ", ".join(f"{k}={v!r}" for k, v in zip(self.__slots__, self._fields())) + ")"

    def __reduce__(self) -> tuple[Any, ...]:  # pickling (executors' processes)
        return (_score, self._fields())



def _score(query_id: str, run: int | None, metric: str, value: float | None, error: str | None) -> Score:
    return Score(query_id=query_id, run=run, metric=metric, value=value, error=error)


class Detail(_Record):
    """Evidence behind the scores of one (query, run): ``section`` names the metric family.

    ``data`` is kept as compressed compact JSON while the run holds it (a dict per output and metric would be most of a large
    run's memory) and decoded at each read: reading gives an equal, fresh dict. Data that would not come back
    equal from JSON (tuples, keys that are not text, NaN) is kept as given.
    """

    __slots__ = ("query_id", "run", "section", "_packed")
    query_id: str
    run: int | None
    section: str
    _packed: bytes | dict[str, Any]

    def __init__(self, *, query_id: str, run: int | None, section: str, data: dict[str, Any]) -> None:
        if not isinstance(query_id, str) or not isinstance(section, str) or not isinstance(data, dict):
            raise ValueError("a Detail has a text query_id and section, and a dict of data")
        setter = object.__setattr__
        setter(self, "query_id", query_id)
        setter(self, "run", run)
        setter(self, "section", sys.intern(section))
        setter(self, "_packed", _pack(data))

    @property
    def data(self) -> dict[str, Any]:
        packed = self._packed
        return json.loads(zlib.decompress(packed)) if isinstance(packed, bytes) else packed

    def as_dict(self) -> dict[str, Any]:
        return {"query_id": self.query_id, "run": self.run, "section": self.section, "data": self.data}

    def __eq__(self, other: object) -> bool:
        return self.as_dict() == other.as_dict() if isinstance(other, Detail) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # its data is a dict

    def __repr__(self) -> str:
        return f"Detail(query_id={self.query_id!r}, run={self.run!r}, section={self.section!r}, data={self.data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_detail, (self.query_id, self.run, self.section, self.data))


def _pack(data: dict[str, Any]) -> bytes | dict[str, Any]:
    """``data`` as compact UTF-8 JSON, compressed (a third of the size), when it comes back from JSON equal to
    itself; else ``data`` itself."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return data
    return zlib.compress(text.encode("utf-8"), 1) if json.loads(text) == data else data


def _detail(query_id: str, run: int | None, section: str, data: dict[str, Any]) -> Detail:
    return Detail(query_id=query_id, run=run, section=section, data=data)


class EvalResult(BaseModel):
    """Scores and details produced by an evaluator."""

    scores: list[Score] = []
    details: list[Detail] = []

    def extend(self, other: EvalResult) -> None:
        self.scores.extend(other.scores)
        self.details.extend(other.details)
