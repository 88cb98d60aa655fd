"""The ``data`` of ``evaluate``: a pandas DataFrame, a list of dicts / ``RAGOutput``, or a path -> RAG outputs.

Everything goes through the input readers' validation (``open_rag_eval.inputs``), so an object is accepted or
refused exactly as the same data in a file would be:

- a path (``str`` / ``os.PathLike``): a ``.csv`` or ``.jsonl`` file, read like ``input:``;
- a DataFrame: its columns are a CSV's header and its rows the CSV's rows, in either CSV layout (one row per
  passage; or one row per answer with a ``contexts`` column holding a list of passages, ragas' columns included);
- a list (or tuple) of dicts in the JSONL schema or the list-of-contexts layout, and/or ``RAGOutput`` objects.

Errors name the item: ``data[3]: field 'answer': ...`` for a list, ``DataFrame row 3: field 'passage': ...`` for a
DataFrame (``row`` is the position, as in ``df.iloc[3]``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.text import Where, check_text
from open_rag_eval.inputs.validate import check_text_value, tallied
from open_rag_eval.core.types import RAGOutput

__all__ = ["EMPTY_DATA", "to_outputs"]

EMPTY_DATA = "no RAG outputs to evaluate (empty data)"
_HERE = "<data>"  # the file name the readers are given; errors are renamed to the item they concern
_LIST_COLUMNS = ("contexts", "retrieved_contexts", "context_ids", "retrieved_context_ids")
_PASSAGE_FIELDS = ("contexts", "retrieved_contexts", "passages")  # missing (None, NaN) is unknown: kept, refused


def to_outputs(data: Any, empty: bool = False) -> list[RAGOutput]:
    """The RAG outputs ``data`` holds (see the module docstring); ``InputError`` naming the item and field.
    ``empty``: an empty DataFrame or list is no outputs (a config whose evaluator has rows of its own, e.g. a TREC
    run file), not an error."""
    from open_rag_eval.inputs import read_outputs

    if isinstance(data, (str, os.PathLike)):
        return read_outputs(Path(data))
    if _is_dataframe(data):
        with tallied():
            return _renamed(lambda: _from_frame(data), "DataFrame", lambda n: f"DataFrame row {n}", empty)
    if isinstance(data, (list, tuple)):
        with tallied():
            return _renamed(lambda: _from_items(data), "data", lambda n: f"data[{n}]", empty)
    raise InputError(f"expected a pandas DataFrame, a list of dicts or RAGOutputs, or a path to a .csv/.jsonl "
                     f"file; got {type(data).__name__}", file="data")


def _is_dataframe(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pandas")


def _renamed(read: Callable[[], list[RAGOutput]], whole: str, name: Callable[[int], str], empty: bool = False
             ) -> list[RAGOutput]:
    """Run a reader on in-memory data (item n at "line" n + 1) and name the item in its errors."""
    try:
        outputs = read()
    except InputError as error:
        if error.file != _HERE:
            raise
        problem = re.sub(r"\bline ([0-9]+)", lambda m: name(int(m.group(1)) - 1), error.problem)
        item = name(error.line - 1) if error.line else whole
        raise InputError(problem, file=item, field=error.field) from None
    if not outputs and not empty:
        raise InputError(EMPTY_DATA, file="data")
    return [_named(output, name) for output in outputs]


def _named(output: RAGOutput, name: Callable[[int], str]) -> RAGOutput:
    """``source`` (shown in results.json) names the item the output came from."""
    file, _, line = (output.source or "").rpartition(":")
    if file != _HERE or not (line.isascii() and line.isdigit()):
        return output
    return output.model_copy(update={"source": name(int(line) - 1)})


def _from_items(items: Sequence[Any]) -> list[RAGOutput]:
    from open_rag_eval.inputs import output_to_json
    from open_rag_eval.inputs.jsonl import outputs_from_objects

    objects = []
    for index, item in enumerate(items):
        where = Where(_HERE, index + 1)
        if isinstance(item, RAGOutput):
            objects.append((where, {**output_to_json(item), "answer_text": item.answer_text}))
        elif isinstance(item, dict):
            objects.append((where, {str(key): None if _missing(value) else _plain(value) for key, value in item.items()
                                    if not _missing(value) or key in _PASSAGE_FIELDS}))
        else:
            raise where.error(f"expected a dict or a RAGOutput, got {type(item).__name__}: it cannot be scored")
    return outputs_from_objects(objects)


def _from_frame(frame: Any) -> list[RAGOutput]:
    from open_rag_eval.inputs.csv_layout import outputs_from_rows

    header = [str(name).strip() for name in frame.columns]
    if len(frame) == 0:
        raise InputError("the DataFrame has no rows", file="DataFrame")
    rows = []
    for position, values in enumerate(frame.itertuples(index=False, name=None)):
        where = Where(_HERE, position + 1)
        rows.append((position + 1, {name: _cell(name, value, where) for name, value in zip(header, values)}))
    return outputs_from_rows(_HERE, header, rows)


def _cell(name: str, value: Any, where: Where) -> Any:
    """A DataFrame cell as the CSV reader sees it: text ("" when missing); list columns stay lists."""
    value = _plain(value)
    if name in _LIST_COLUMNS and isinstance(value, (list, dict)):
        return value
    if _missing(value):
        return ""
    check_text_value(name, value, _HERE, where.line)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # an int column with missing cells is float in pandas: 1.0 is the run 1
    text = value if isinstance(value, str) else str(value)
    return check_text(text, where, name, None)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (as pandas holds them) as Python values; containers converted throughout."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def _missing(value: Any) -> bool:
    """None, NaN, pandas' NA / NaT: an empty cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return type(value).__name__ in ("NAType", "NaTType")
