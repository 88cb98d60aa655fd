"""The service's OpenAPI description, as committed in ``openapi.json`` beside this module.

Regenerate after an intended API change: ``python -m open_rag_eval.service.openapi`` (rewrites ``openapi.json``; a
test fails while the committed file and the app disagree).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["COMMITTED", "current", "render"]

COMMITTED = Path(__file__).with_name("openapi.json")


def current() -> dict[str, Any]:
    """The schema the app serves, without its version number (a release is not an API change)."""
    from open_rag_eval.service.app import create_app
    from open_rag_eval.service.settings import Settings

    schema = create_app(Settings()).openapi()
    schema["info"].pop("version", None)
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    COMMITTED.write_text(render(current()), encoding="utf-8")
