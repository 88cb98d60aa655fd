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

from open_rag_eval.core.judge_tasks import Tasks

__all__ = ["ResponseFormat", "as_text", "params", "schema_problem", "sent_schema"]

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
    Tasks.UMBRELA: _format("UMBRELAScore", "score", ("0", "1", "2", "3"), "UMBRELAScoreValues"),
    Tasks.NUGGET_CREATE: _format("Nuggets", "nuggets", array=True),
    Tasks.NUGGET_IMPORTANCE: _format("NuggetImportance", "importance", ("vital", "okay"), "NuggetImportanceValues",
                                 array=True),
    Tasks.NUGGET_ASSIGN: _format("NuggetAssignment", "assignment", ("support", "partial_support", "not_support"),
                             "NuggetAssignmentValues", array=True),
    Tasks.SUPPORT: _format("CitationSupport", "support", ("full_support", "partial_support", "no_support"),
                       "CitationSupportValues"),
    Tasks.NO_ANSWER: _format("QueryAnswered", "answered", ("yes", "no"), "QueryAnsweredValues"),
}


def params(task: str, response_format: ResponseFormat) -> dict[str, Any]:
    """The request parameters ``response_format`` adds to a call of ``task``."""
    if response_format == "text":
        return {}
    return {"response_format": VECTARA[task], "stream": False}


def sent_schema(wanted: Any) -> Mapping[str, Any] | None:
    """The JSON schema a ``response_format`` asks by: OpenAI's ``{"type": "json_schema", "json_schema": {"schema":
    S}}`` or the schema beside ``{"type": "json_object", "schema": S}`` (llama-cpp-python's server); None for none."""
    if not isinstance(wanted, Mapping):
        return None
    if wanted.get("type") == "json_schema":
        inner = wanted.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
    elif wanted.get("type") == "json_object":
        schema = wanted.get("schema")
    else:
        return None
    return schema if isinstance(schema, Mapping) else None


def as_text(text: str, sent: Mapping[str, Any]) -> str:
    """``text`` as our parsers read it: the value of the one property a JSON-schema reply holds, else unchanged."""
    if sent_schema(sent.get("response_format")) is None:
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
    """What a reply asked for by a JSON schema (``wanted``: the ``response_format`` sent, in either form) gets
    wrong, saying where: not JSON, not an object, a required property missing, a property the schema does not
    allow, a value of the wrong type, outside the schema's set or range, a list too short or too long. None when
    the schema is met or no schema was sent."""
    schema = sent_schema(wanted)
    if schema is None:
        return None
    try:
        reply = json.loads(text)
    except ValueError:
        return "not JSON (a JSON object was asked for by its schema)"
    if not isinstance(reply, dict):
        return f"JSON but not an object ({type(reply).__name__})"
    return _outside(reply, schema, schema.get("$defs") or {}, "")


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                       "integer": (int,), "number": (int, float)}


def _outside(value: Any, prop: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> str | None:
    """What ``value`` at ``where`` (``labels[2]``, ``verdicts[0].claim``; empty: the reply) gets wrong against
    ``prop``, or None."""
    if "$ref" in prop:
        prop = defs.get(str(prop["$ref"]).rsplit("/", 1)[-1]) or {}
    at = f"{where}: " if where else ""
    kind = prop.get("type")
    allowed = _TYPES.get(str(kind))
    if allowed is not None and (not isinstance(value, allowed) or (kind != "boolean" and isinstance(value, bool))):
        return f"{at}{_short(value)} is not {'an' if str(kind)[0] in 'aeiou' else 'a'} {kind}"
    if "enum" in prop and value not in prop["enum"]:
        return f"{at}{_short(value)} is not one of the schema's values ({', '.join(map(str, prop['enum']))})"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in prop and value < prop["minimum"]:
            return f"{at}{value} is below the schema's minimum {prop['minimum']}"
        if "maximum" in prop and value > prop["maximum"]:
            return f"{at}{value} is above the schema's maximum {prop['maximum']}"
    if isinstance(value, dict):
        return _object_problem(value, prop, defs, where)
    if isinstance(value, list):
        if "minItems" in prop and len(value) < prop["minItems"]:
            return f"{at}{len(value)} items, fewer than the schema's {prop['minItems']}"
        if "maxItems" in prop and len(value) > prop["maxItems"]:
            return f"{at}{len(value)} items, more than the schema's {prop['maxItems']}"
        for i, item in enumerate(value):
            problem = _outside(item, prop.get("items") or {}, defs, f"{where}[{i}]")
            if problem is not None:
                return problem
    return None


def _object_problem(value: Mapping[str, Any], prop: Mapping[str, Any], defs: Mapping[str, Any],
                    where: str) -> str | None:
    properties = prop.get("properties") or {}
    inside = f" of {where}" if where else ""
    for name in prop.get("required") or []:
        if name not in value:
            return f"the object{inside} lacks the property {name!r}"
    if prop.get("additionalProperties") is False:
        extra = [name for name in value if name not in properties]
        if extra:
            return (f"the object{inside} has propert{'ies' if len(extra) > 1 else 'y'} the schema does not allow: "
                    f"{', '.join(repr(name) for name in extra[:5])}")
    for name, item in value.items():
        if name in properties:
            problem = _outside(item, properties[name], defs, f"{where}.{name}" if where else name)
            if problem is not None:
                return problem
    return None


def _short(value: Any, limit: int = 40) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
