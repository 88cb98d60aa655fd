"""The report in a real browser: headless Chromium opens report.html from disk.

Skipped (with the reason shown) only where Chromium or its driver is not installed
(Debian: apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from open_rag_eval.report import write_report
from tests.browser import CHROMIUM, DRIVER, NO_BROWSER, chromium

FIXTURE = Path(__file__).parent / "data" / "results_fixture"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason=NO_BROWSER),
]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    with chromium(tmp_path / "profile") as driver:
        yield driver


@pytest.fixture
def report(tmp_path: Path) -> Path:
    directory = tmp_path / "results"
    shutil.copytree(FIXTURE, directory)
    return write_report(directory)


def test_report_opens_without_errors_and_drilldown_shows_grades_and_labels(browser, report: Path,
                                                                           tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(report.as_uri())
    assert browser.title == "open-rag-eval report"
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []
    assert "SIMULATED" in browser.find_element(By.ID, "judge").text

    # open q1's drill-down from the queries table
    browser.find_element(By.CSS_SELECTOR, '#queries a.open[href="#q-1"]').click()
    q1 = browser.find_element(By.ID, "q-1")
    assert q1.get_attribute("open") is not None
    run1 = q1.find_element(By.CSS_SELECTOR, 'section.run[data-run="1"]')
    grades = [li.find_element(By.CSS_SELECTOR, ".grade").text for li in run1.find_elements(By.CSS_SELECTOR,
                                                                                              "ol.passages li")]
    assert grades == ["3", "0", "3"]
    labels = [c.get_attribute("data-label") for c in run1.find_elements(By.CSS_SELECTOR, ".cite")]
    assert labels == ["FS", "PS"]
    run2 = q1.find_element(By.CSS_SELECTOR, 'section.run[data-run="2"]')
    assert [c.text for c in run2.find_elements(By.CSS_SELECTOR, ".cite")] == ["[d1] FS", "[d2] NS"]
    assert "0.91" in run1.find_element(By.CSS_SELECTOR, ".hhem").text
    browser.save_screenshot(str(tmp_path / "laptop.png"))

    # q2 run 2 cites a passage that was not retrieved
    browser.find_element(By.CSS_SELECTOR, '#queries a.open[href="#q-2"]').click()
    fabricated = browser.find_element(By.CSS_SELECTOR, '#q-2 section.run[data-run="2"] .cite')
    assert fabricated.get_attribute("data-label") == "fabricated"
    assert (tmp_path / "laptop.png").stat().st_size > 10_000


def test_passage_html_is_shown_as_text_never_run(browser, report: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(report.as_uri())
    assert browser.execute_script("return window.__pwned === undefined")
    browser.find_element(By.CSS_SELECTOR, '#queries a.open[href="#q-3"]').click()
    passage = browser.find_element(By.CSS_SELECTOR, '#q-3 li[data-pid="h1"] .ptext')
    assert passage.text.startswith("<script>window.__pwned = 1;")
    assert browser.find_elements(By.CSS_SELECTOR, "#q-3 img") == []
    more = browser.find_element(By.CSS_SELECTOR, "#q-3 details.more")
    assert not more.find_element(By.CSS_SELECTOR, ".errors").is_displayed()  # folded below the evidence
    more.find_element(By.TAG_NAME, "summary").click()
    assert "HHEM model weights not found" in more.find_element(By.CSS_SELECTOR, ".errors").text


def test_sort_worst_first_and_filter(browser, report: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(report.as_uri())
    Select(browser.find_element(By.ID, "worst")).select_by_value("nuggets.weighted")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#queries tbody a.open")]
    assert ids == ["q4", "q2", "q3", "q1"]  # weighted means 0, 0.5, 0.5, 0.8 (ties keep table order)
    browser.find_element(By.ID, "filter").send_keys("dune")
    visible = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#queries tbody a.open") if a.is_displayed()]
    assert visible == ["q2"]
    browser.set_window_size(390, 844)  # a phone
    browser.find_element(By.CSS_SELECTOR, '#queries a.open[href="#q-2"]').click()
    browser.save_screenshot(str(tmp_path / "phone.png"))
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390  # nothing forces sideways scrolling of the page (wide tables scroll in their box)


def _shot(browser, tmp_path: Path, name: str) -> Path:
    """A screenshot in REPORT_SCREENSHOTS (to look at) or the test's folder."""
    import os

    folder = Path(os.environ.get("REPORT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(folder / name))
    return folder / name


def _absolute_input(directory: Path, tmp_path: Path) -> None:
    import json

    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    manifest["input"]["path"] = str(tmp_path / "private-folder" / "answers.csv")
    rates = dict.fromkeys(("clean", "fallback", "echo", "invalid", "failed", "reasked"), 0.0)
    manifest["health"] = {"healthy": True, "thresholds": {}, "problems": [],  # its table must not widen the page
                          "tasks": {task: {"judgments": 195, "rates": {**rates, "clean": 1.0}}
                                    for task in ("umbrela", "nugget_importance", "nugget_assign", "support")}}
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    results = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    for line, item in enumerate(results["outputs"], start=2):
        item["source"] = f"{tmp_path / 'private-folder' / 'answers.csv'}:{line}"
    (directory / "results.json").write_text(json.dumps(results), encoding="utf-8")


@pytest.mark.parametrize("width", [1400, 390])
def test_layout_headline_first_folded_families_evidence_first(browser, report: Path, tmp_path: Path,
                                                               width: int) -> None:
    from selenium.webdriver.common.by import By

    _absolute_input(report.parent, tmp_path)
    write_report(report.parent)
    browser.set_window_size(width, 900)
    browser.get(report.as_uri())
    assert str(tmp_path) not in browser.page_source and "private-folder" not in browser.page_source
    # the headline panel is the first thing on screen
    headline = browser.find_element(By.ID, "headline")
    assert headline.is_displayed() and headline.rect["y"] < 300
    cards = headline.find_elements(By.CSS_SELECTOR, ".card")
    assert len(cards) == 5 and all(c.is_displayed() for c in cards)
    assert cards[0].get_attribute("data-status") == "good" and "↑" in cards[0].text
    _shot(browser, tmp_path, f"report-{width}-top.png")
    # every family folded; one click opens it
    families = browser.find_elements(By.CSS_SELECTOR, "details.family")
    assert families and all(f.get_attribute("open") is None for f in families)
    assert not families[0].find_element(By.CSS_SELECTOR, "table").is_displayed()
    families[0].find_element(By.TAG_NAME, "summary").click()
    assert families[0].find_element(By.CSS_SELECTOR, "table").is_displayed()
    # the queries table is not clipped on a laptop; on a phone it scrolls inside its box, never the page
    clipped = browser.execute_script(
        "var t = document.getElementById('queries'); return t.scrollWidth - t.parentElement.clientWidth;")
    if width >= 1400:
        assert clipped <= 0
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    # a query opens on its evidence; scores and diagnostics folded below
    browser.find_element(By.CSS_SELECTOR, '#queries a.open[href="#q-1"]').click()
    run1 = browser.find_element(By.CSS_SELECTOR, '#q-1 section.run[data-run="1"]')
    passages = run1.find_element(By.CSS_SELECTOR, "ol.passages")
    more = run1.find_element(By.CSS_SELECTOR, "details.more")
    assert passages.is_displayed() and more.get_attribute("open") is None
    assert not more.find_element(By.CSS_SELECTOR, ".chips").is_displayed()
    assert passages.rect["y"] < run1.find_element(By.CSS_SELECTOR, ".cite").rect["y"] < more.rect["y"]
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "q-1"))
    _shot(browser, tmp_path, f"report-{width}-query.png")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", [1400, 390])
def test_comparison_view(browser, report: Path, tmp_path: Path, width: int) -> None:
    from selenium.webdriver.common.by import By

    from open_rag_eval.report.comparison import write_comparison

    candidate = tmp_path / "candidate"
    shutil.copytree(report.parent, candidate)
    _absolute_input(candidate, tmp_path)
    page = write_comparison([report.parent, candidate], tmp_path / "compare.html")
    browser.set_window_size(width, 900)
    browser.get(page.as_uri())
    assert browser.title == "open-rag-eval comparison"
    assert str(tmp_path) not in browser.page_source
    table = browser.find_element(By.ID, "headline-compare")
    assert table.is_displayed() and table.rect["y"] < 300
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [r.get_attribute("data-metric") for r in rows][:3] == ["umbrela.mean", "nuggets.weighted", "citation.f1"]
    assert "PASS" in rows[0].text and "no significant difference" not in rows[0].text  # identical runs
    assert "A results" in table.text and "B candidate" in table.text
    assert all(f.get_attribute("open") is None for f in browser.find_elements(By.CSS_SELECTOR, "details.family"))
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    clipped = browser.execute_script("var t = document.getElementById('headline-compare'); "
                                     "return t.scrollWidth - t.parentElement.clientWidth;")
    assert clipped <= 0  # the headline comparison fits, on a phone too
    _shot(browser, tmp_path, f"compare-{width}.png")


@pytest.fixture
def demo_report(tmp_path: Path) -> Path:
    """The demo's data judged by the simulated judge (trec metrics): no value failed, a judge-health table with
    its top labels."""
    from open_rag_eval.config import load_config_text
    from open_rag_eval.run.pipeline import run

    demo = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
    loaded = load_config_text(f"input: {demo}\noutput_dir: out\njudge: {{model: simulated-judge, cache: false, "
                              "simulated: {latency_ms: 0, seed: 1}}\nevaluators: [{type: trec, metrics: [umbrela, "
                              "nuggets, citation, no_answer]}]\n", base_dir=tmp_path)
    return write_report(run(loaded).output_dir)


def _scrolls(browser, table: str) -> tuple[bool, bool]:
    """(the box around ``table`` is wider inside than on screen, the scroll hint above it is shown)."""
    return tuple(browser.execute_script(
        f"var box = document.querySelector({table!r}).closest('.scroll'); var hint = box.previousElementSibling;"
        "return [box.scrollWidth > box.clientWidth + 1, hint.classList.contains('scroll-hint') && "
        "hint.offsetParent !== null && hint.getBoundingClientRect().height > 0];"))


@pytest.mark.parametrize("width", [390, 1400])
def test_a_phone_sees_the_query_and_its_headline_metrics_first_and_that_tables_scroll(browser, demo_report: Path,
                                                                                     tmp_path: Path,
                                                                                     width: int) -> None:
    from selenium.webdriver.common.by import By

    browser.set_window_size(width, 844)
    browser.get(demo_report.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    # the queries table opens on the query id, the query and the headline metrics the cards show
    cards = [c.get_attribute("data-metric") for c in browser.find_elements(By.CSS_SELECTOR, "#headline .card")]
    heads = browser.find_elements(By.CSS_SELECTOR, "#queries thead th")
    keys = [th.get_attribute("data-sort") or th.text for th in heads]
    columns = keys[2:keys.index("runs")]
    assert keys[:2] == ["id", "query"] and columns and columns == [m for m in cards if m in columns]
    assert keys[keys.index("runs"):] == ["runs", "failed", "undefined", "skipped"]
    box = browser.execute_script("return document.getElementById('queries').closest('.scroll')"
                                 ".getBoundingClientRect().right")
    on_screen = [k for th, k in zip(heads, keys) if th.rect["x"] + th.rect["width"] <= box + 1]
    if width == 390:
        # a phone: what fits in the box is the query and (at least) its first headline metric, never the counts;
        # the hint above says the table scrolls, and the page itself never scrolls sideways
        assert on_screen[:3] == keys[:3] and "runs" not in on_screen and "failed" not in on_screen
        assert _scrolls(browser, "#queries") == (True, True)
        assert browser.find_element(By.CSS_SELECTOR, ".scroll-hint").text.startswith("⇄ the table scrolls sideways")
    else:
        assert on_screen == keys and _scrolls(browser, "#queries") == (False, False)
    wide, hinted = _scrolls(browser, "#judge-health table")
    assert hinted == wide and (wide or width == 1400)  # the health table is cut on a phone: said so
    health = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#judge-health thead th")]
    assert health[:4] == ["task", "n", "clean", "failed"]  # the share clean and the share with no reply first
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    # nothing failed: the coverage line's zero counts are in a neutral colour, never red
    zeros = [s for s in browser.find_elements(By.CSS_SELECTOR, "#coverage .miss") if s.text.startswith("0 ")]
    assert [z.text for z in zeros][:1] == ["0 failed"]
    red = browser.execute_script("var p = document.createElement('span'); p.style.color = 'var(--bad)';"
                                 "document.body.appendChild(p); return getComputedStyle(p).color;")
    assert all(z.value_of_css_property("color") != red for z in zeros)
    _shot(browser, tmp_path, f"report-{width}-queries.png")
