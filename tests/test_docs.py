"""The documentation resolves: every relative link of README.md and docs/*.md points to a file of the repository,
and nothing refers to method notes that are not in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        if path:
            if not (doc.parent / path).exists():
                broken.append(target)
        elif anchor:
            headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
            if anchor not in headings:
                broken.append(target)
    assert not broken, f"{doc.name}: broken links {broken}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower-case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_no_reference_to_notes_outside_the_repository() -> None:
    offenders = []
    for path in [*ROOT.glob("open_rag_eval/**/*.py"), *ROOT.glob("tests/**/*.py"), *DOCS, ROOT / "setup.py"]:
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8")
        if "METHODS.md" in text or "DESIGN.md" in text or "../shared" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_methods_doc_covers_every_method() -> None:
    text = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    for heading in ("UMBRELA", "AutoNuggetizer", "Citation support", "HHEM", "No-answer detection", "Consistency",
                    "Judge test-retest", "Golden-label metrics", "Lexical checks", "Decisions"):
        assert f"## {heading}" in text, heading



def test_readme_input_examples_parse(tmp_path: Path) -> None:
    """The example rows of the README's CSV and JSONL blocks are valid inputs, as a newcomer would copy them."""
    from open_rag_eval.inputs import read_outputs

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(csv|json)\n(.*?)```", text, flags=re.DOTALL)
    assert sum(kind == "csv" for kind, _ in blocks) >= 2 and any(kind == "json" for kind, _ in blocks)
    for index, (kind, body) in enumerate(blocks):
        path = tmp_path / f"example{index}.{'csv' if kind == 'csv' else 'jsonl'}"
        path.write_text(body, encoding="utf-8")
        outputs = read_outputs(path)
        assert outputs and all(o.passages and o.answer for o in outputs), path.name
        assert all(part.citations for o in outputs for part in o.answer), path.name  # every example cites


def test_readme_and_results_name_every_generation_column() -> None:
    from open_rag_eval.evaluators.generation import METRICS, GenerationEvaluator, GenerationOptions

    options = GenerationOptions.model_validate({"metrics": list(METRICS), "answer_correctness": {"blend": True},
                                                "answer_relevance": {"variants": ["embedding", "judged"]}})
    columns = GenerationEvaluator.metric_names(options)
    for doc in ("README.md", "docs/RESULTS.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        unnamed = [column for column in columns if f"`{column}`" not in text]
        assert not unnamed, f"{doc} does not name these generation columns: {unnamed}"
