"""Replies asked for as JSON: vectara's response formats, and reading such a reply as the text our parsers read.

``response_format: vectara`` (on ``umbrela``, ``nuggets``, ``citation``, ``no_answer``; set by ``profile: vectara``)
sends each call the JSON schema vectara's open-rag-eval 0.3.0 sends (its pydantic reply models as the OpenAI SDK's
``parse`` writes them, with ``stream: false``), so its requests are the same. A reply that is the JSON object the
schema asks for (one property) is read as that property's value: a label as the label, a list as a list
(``{"score": "2"}`` reads as ``2``); any other reply is read as it came, by the same parsers as a text reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["ResponseFormat", "as_text", "params", "schema_problem"]

ResponseFormat = Literal["text", "vectara"]


def _format(title: str, field: str, values: Sequence[str] = (), enum: str = "", array: bool = False) -> dict[str, Any]:
    """The response_format the OpenAI SDK writes for a pydantic model ``title`` with one field ``field``."""
    item: dict[str, Any] = {"$ref": f"#/$defs/{enum}"} if enum else {"type": "string"}
    prop = {"items": item, "title": field.capitalize(), "type": "array"} if array else item
    schema: dict[str, Any] = {"additionalProperties": False, "properties": {field: prop}, "required": [field],
                              "title": title, "type": "object"}
    if enum:
        schema["$defs"] = {enum: {"enum": list(values), "title": enum, "type": "string"}}
    return {"type": "json_schema", "json_schema": {"name": title, "schema": schema, "strict": True}}


VECTARA: dict[str, dict[str, Any]] = {  # task -> vectara's response format (its metrics' reply models)
    "umbrela": _format("UMBRELAScore", "score", ("0", "1", "2", "3"), "UMBRELAScoreValues"),
    "nugget_create": _format("Nuggets", "nuggets", array=True),
    "nugget_importance": _format("NuggetImportance", "importance", ("vital", "okay"), "NuggetImportanceValues",
                                 array=True),
    "nugget_assign": _format("NuggetAssignment", "assignment", ("support", "partial_support", "not_support"),
                             "NuggetAssignmentValues", array=True),
    "support": _format("CitationSupport", "support", ("full_support", "partial_support", "no_support"),
                       "CitationSupportValues"),
    "no_answer": _format("QueryAnswered", "answered", ("yes", "no"), "QueryAnsweredValues"),
}


def params(task: str, response_format: ResponseFormat) -> dict[str, Any]:
    """The request parameters ``response_format`` adds to a call of ``task``."""
    if response_format == "text":
        return {}
    return {"response_format": VECTARA[task], "stream": False}


def as_text(text: str, sent: Mapping[str, Any]) -> str:
    """``text`` as our parsers read it: the value of the one property a JSON-schema reply holds, else unchanged."""
    wanted = sent.get("response_format")
    if not isinstance(wanted, Mapping) or wanted.get("type") != "json_schema":
        return text
    try:
        reply = json.loads(text)
    except ValueError:
        return text
    if not isinstance(reply, dict) or len(reply) != 1:
        return text
    (value,) = reply.values()
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return json.dumps(value, ensure_ascii=False)
    return text


def schema_problem(text: str, wanted: Any) -> str | None:
    """What a reply asked for by a JSON schema (``wanted``: the ``response_format`` sent) gets wrong: not JSON, not
    an object, a required property missing, a value outside the schema's set. None when the schema is met or no
    schema was sent."""
    if not isinstance(wanted, Mapping) or wanted.get("type") != "json_schema":
        return None
    schema = (wanted.get("json_schema") or {}).get("schema") or {}
    try:
        reply = json.loads(text)
    except ValueError:
        return "not JSON (a JSON object was asked for by its schema)"
    if not isinstance(reply, dict):
        return f"JSON but not an object ({type(reply).__name__})"
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in reply:
            return f"the object lacks the property {name!r}"
        problem = _outside(reply[name], properties.get(name) or {}, schema.get("$defs") or {})
        if problem is not None:
            return f"{name}: {problem}"
    return None


def _outside(value: Any, prop: Mapping[str, Any], defs: Mapping[str, Any]) -> str | None:
    if "$ref" in prop:
        prop = defs.get(str(prop["$ref"]).rsplit("/", 1)[-1]) or {}
    if "enum" in prop and value not in prop["enum"]:
        return f"{value!r} is not one of the schema's values ({', '.join(map(str, prop['enum']))})"
    if prop.get("type") == "array":
        if not isinstance(value, list):
            return "not a list"
        for item in value:
            problem = _outside(item, prop.get("items") or {}, defs)
            if problem is not None:
                return problem
    return None
