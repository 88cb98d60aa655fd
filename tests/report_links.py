"""Links of an HTML report and the files of a results folder, for the tests of a large run's report pages."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from open_rag_eval.report import paged

N_LARGE = paged.INLINE_QUERIES + 5  # a run whose report has pages


_LINK = re.compile(r"""<[a-zA-Z][^>]*?\s(?:href|src)=(["'])(.*?)\1""")  # content is escaped: no raw quote in it


def relative_links(page: Path | str) -> list[str]:
    """The links of a page (a file, or its HTML) that point at files: not anchors, not other sites."""
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    links = [match.group(2) for match in _LINK.finditer(text)]
    return [link for link in links if link and not link.startswith("#") and not urlsplit(link).scheme]


def broken_links(report: Path) -> list[str]:
    """Every relative link of ``report`` and of the pages it links to that does not name a file (one level)."""
    broken = []
    for page in [report, *(report.parent / unquote(urlsplit(link).path) for link in relative_links(report))]:
        for link in relative_links(page) if page.is_file() else []:
            target = (page.parent / unquote(urlsplit(link).path)).resolve()
            if not target.is_file():
                broken.append(f"{page.name}: {link}")
        if not page.is_file():
            broken.append(f"{report.name}: {page.name}")
    return broken


def tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def large_items(n: int = N_LARGE) -> list[dict[str, object]]:
    """``n`` outputs (one run each), a third of them citing the wrong passage."""
    return [{"query_id": f"q{i:03d}", "query": f"What is known about item {i}?",
             "passages": [{"id": "d1", "text": f"Item {i} is studied in the museum."},
                          {"id": "d2", "text": "Tickets are sold at the door."}],
             "answer": [{"text": f"Item {i} is studied in the museum.", "citations": ["d1" if i % 3 else "d2"]}]}
            for i in range(n)]
