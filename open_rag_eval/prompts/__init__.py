"""The published prompt templates as data, and a tiny renderer.

Each template is one file in this folder, kept byte for byte as published; ``templates.yaml`` records its id,
source, licence and sha256. ``load(id)`` reads a template and refuses it when its bytes do not match the recorded
hash, so a stray editor "fix" (a trimmed trailing space) can never silently change a method.

A file of ours may open with header lines starting ``#|`` (what it is, its version, what it adapts and under which
licence): they are part of the hashed bytes but not of the text sent to the judge.

Rendering is plain ``str.format`` (docs/methods.md, Conventions): values are inserted as given and never re-parsed, so
braces inside a passage are harmless.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from open_rag_eval.core.errors import OpenRagEvalError
from open_rag_eval.core.judge_tasks import TABLE

__all__ = ["Template", "TemplateIntegrityError", "load", "manifest", "prompt_hashes", "reply_schema"]

_PACKAGE = "open_rag_eval.prompts"


class TemplateIntegrityError(OpenRagEvalError):
    """A template file does not match the sha256 recorded in the manifest."""


@dataclass(frozen=True)
class Template:
    id: str
    text: str
    sha256: str
    source: str
    licence: str

    def render(self, **fields: Any) -> str:
        return self.text.format(**fields)


@cache
def manifest() -> tuple[dict[str, str], ...]:
    """The manifest entries, in file order."""
    raw = resources.files(_PACKAGE).joinpath("templates.yaml").read_text(encoding="utf-8")
    entries = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's: a tenth of the CPU
    return tuple({key: str(value) for key, value in entry.items()} for entry in entries)


@cache
def load(template_id: str) -> Template:
    """The template ``template_id``, verified against its recorded sha256."""
    entries = {entry["id"]: entry for entry in manifest()}
    if template_id not in entries:
        raise KeyError(f"unknown prompt template '{template_id}'; known: {', '.join(sorted(entries))}")
    entry = entries[template_id]
    data = resources.files(_PACKAGE).joinpath(entry["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise TemplateIntegrityError(
            f"prompt template '{template_id}' ({entry['file']}) has sha256 {digest}, expected {entry['sha256']}"
        )
    return Template(template_id, _without_header(data.decode("utf-8")), digest, entry["source"], entry["licence"])


def _without_header(text: str) -> str:
    """The text after the leading ``#|`` header lines (none in the published templates)."""
    lines = text.split("\n")
    start = 0
    while start < len(lines) and lines[start].startswith("#|"):
        start += 1
    return "\n".join(lines[start:])


def prompt_hashes() -> dict[str, str]:
    """id -> sha256 of every template (for the run manifest)."""
    return {entry["id"]: entry["sha256"] for entry in manifest()}


def reply_schema(task: str, form: str = "json_schema") -> dict[str, Any] | None:
    """The ``response_format`` asking for ``task``'s reply as JSON (the file under ``schemas/`` its entry in
    ``core.judge_tasks.TABLE`` names: an object holding the value the method's parser reads), or None when the
    task has none. ``judge.structured`` sends it in its form:
    ``json_schema``, OpenAI's ``{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}``;
    ``json_object``, the schema beside ``{"type": "json_object"}`` (llama-cpp-python's server). The published prompt
    text is unchanged."""
    value = _schema_file(task)
    if value is None:
        return None
    if form == "json_object":
        return {"type": "json_object", "schema": json.loads(json.dumps(value["json_schema"]["schema"]))}
    return json.loads(json.dumps(value))  # a copy: the caller's to keep


@cache
def _schema_file(task: str) -> dict[str, Any] | None:
    known = TABLE.get(task)
    if known is None or known.schema is None:
        return None
    path = resources.files(_PACKAGE).joinpath("schemas", known.schema)
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else None
