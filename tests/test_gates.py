"""One verdict at every gate: PASS, REGRESSION or INCONCLUSIVE (``scoring.verdict``), the same through ``compare``,
``assert_metrics``, ``sweep`` and ``ablate``, at n = 4, 8 and 30 paired queries. INCONCLUSIVE exits 7 and raises
``Inconclusive``; a gate never passes what its test cannot tell."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import pytest

from open_rag_eval.api.results import Results
from open_rag_eval.cli import main
from open_rag_eval.config import SweepOptions
from open_rag_eval.core.errors import EXIT_INCONCLUSIVE, Inconclusive, OpenRagEvalError, exit_code
from open_rag_eval.core.types import Score
from open_rag_eval.report.loader import load_results
from open_rag_eval.scoring.paired import PairedResult
from open_rag_eval.scoring.verdict import Rule, decide, worst
from open_rag_eval.sweeps.history import History, SweepRecord
from open_rag_eval.sweeps.run import compare as sweep_compare
from open_rag_eval.testing import assert_metrics

METRIC = "citation.f1"


def _values(n: int, drop: float) -> tuple[list[float], list[float]]:
    """Baseline values 0.5..0.9 cycling; the candidate's ``drop`` lower on every query (a spread in the drops so
    the bootstrap interval is not a point)."""
    base = [0.5 + 0.1 * (i % 5) for i in range(n)]
    return base, [b - drop - (0.01 * (i % 3) if drop else 0.0) for i, b in enumerate(base)]


def _csv_text(values: list[float], metric: str = METRIC) -> str:
    lines = [f"query_id,query,run,{metric}"] + [f"q{i:02d},question {i},1,{v!r}" for i, v in enumerate(values)]
    return "\n".join(lines) + "\n"


def _folder(path: Path, values: list[float]) -> Path:
    path.mkdir(parents=True)
    (path / "results.csv").write_text(_csv_text(values), encoding="utf-8")
    return path


def _compare_cli(tmp_path: Path, n: int, drop: float, gate: str) -> int:
    a, b = _values(n, drop)
    return main(["-q", "compare", str(_folder(tmp_path / "a", a)), str(_folder(tmp_path / "b", b)),
                 "--output-dir", str(tmp_path / "out"), "--fail-if-worse", gate, "--resamples", "2000"])


def _assert(n: int, drop: float, **gate: object) -> str:
    """assert_metrics on the candidate against the baseline: PASS, REGRESSION (AssertionError) or INCONCLUSIVE."""
    a, b = _values(n, drop)
    try:
        assert_metrics(Results({"results.csv": _csv_text(b)}), baseline=Results({"results.csv": _csv_text(a)}),
                       resamples=2000, **gate)  # type: ignore[arg-type]
    except Inconclusive:
        return "INCONCLUSIVE"
    except AssertionError:
        return "REGRESSION"
    return "PASS"


def _sweep(tmp_path: Path, n: int, drop: float, options: SweepOptions) -> str:
    a, b = _values(n, drop)
    with History(tmp_path / "h.sqlite") as history:
        for sweep_id, values in (("s0", a), ("s1", b)):
            history.append(SweepRecord(
                id=sweep_id, started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:01:00+00:00",
                system="x", config_digest="d", output_dir="o", n_queries=n, n_outputs=n, n_failed_outputs=0,
                simulated=False, scores=[Score(query_id=f"q{i}", run=None, metric=METRIC, value=v)
                                         for i, v in enumerate(values)]))
        (result,) = sweep_compare(history, "s0", "s1", options)
    return result.state.upper() if result.state != "ok" else "PASS"


def _ablate(tmp_path: Path, n: int, drop: float, rule: Rule | None = None) -> str:
    """The ablation table's verdict on the variant, and the gate ``ablate --fail-if-worse`` exits with (the same)."""
    from open_rag_eval.ablation.table import ablation_table, gate

    a, b = _values(n, drop)
    folder = tmp_path / f"ablate-{n}-{drop}-{rule}"
    base, variant = load_results(_folder(folder / "base", a)), load_results(_folder(folder / "var", b))
    base.label, variant.label = "base", "variant"
    table = ablation_table(base, [base, variant], [METRIC], resamples=2000, rules={METRIC: rule or Rule()})
    (row,) = table.rows
    (verdict,) = gate(table, [METRIC])
    assert verdict.metric == f"{METRIC} (variant)" and str(row["verdict"]).split()[0] == verdict.outcome
    return worst([verdict])


CASES = [  # (n, drop, expected verdict with no drop allowed)
    (4, 0.0, "PASS"),  # nothing moved
    (4, 0.3, "INCONCLUSIVE"),  # 4 queries: smallest possible p 0.125 > 0.05, a drop cannot be confirmed
    (8, 0.3, "REGRESSION"),  # every one of 8 queries dropped: p = 2/256
    (8, 0.0, "PASS"),
    (30, 0.3, "REGRESSION"),
    (30, 0.0, "PASS"),
]


@pytest.mark.parametrize(("n", "drop", "expected"), CASES)
def test_every_gate_gives_the_same_verdict(tmp_path: Path, n: int, drop: float, expected: str) -> None:
    code = _compare_cli(tmp_path / "compare", n, drop, METRIC)
    assert code == {"PASS": 0, "REGRESSION": 1, "INCONCLUSIVE": 7}[expected]
    assert _assert(n, drop) == expected
    assert _sweep(tmp_path, n, drop, SweepOptions(thresholds={METRIC: 0.0})) == expected
    assert _ablate(tmp_path, n, drop) == expected


def test_an_absolute_drop_rule_trips_whatever_the_p_value(tmp_path: Path) -> None:
    # 4 queries cannot be significant; a drop of 0.3 beyond an allowed 0.1 is still a regression
    assert _compare_cli(tmp_path / "c1", 4, 0.3, f"{METRIC}:0.1") == 1
    assert _compare_cli(tmp_path / "c2", 4, 0.3, f"{METRIC}:0.5") == 0  # within the allowed drop
    assert _assert(4, 0.3, fail_if_drop={METRIC: 0.1}) == "REGRESSION"
    assert _sweep(tmp_path, 4, 0.3, SweepOptions(thresholds={METRIC: 0.0}, fail_if_drop={METRIC: 0.1})) == \
        "REGRESSION"
    assert _ablate(tmp_path, 4, 0.3, Rule(max_drop=0.1, fail_if_drop=0.1)) == "REGRESSION"  # ablate --fail-if-worse M:0.1
    assert _ablate(tmp_path, 4, 0.3, Rule(max_drop=0.5, fail_if_drop=0.5)) == "PASS"


def test_the_issue_compare_case_ci_excludes_zero_is_no_pass() -> None:
    # compare --fail-if-worse citation.f1:0.1 with a CI of [-0.75, -0.12] (not significant after Holm): REGRESSION
    test = PairedResult(n=5, mean_a=0.8, mean_b=0.37, diff=-0.43, ci95_low=-0.75, ci95_high=-0.12, p_value=0.06)
    verdict = decide(METRIC, test, lower=False, rule=Rule(max_drop=0.1, fail_if_drop=0.1), tests=5)
    assert verdict.outcome == "REGRESSION" and "whatever the p-value" in verdict.reason
    # the same evidence without an allowed drop: the test cannot confirm it, so INCONCLUSIVE, naming why
    verdict = decide(METRIC, test, lower=False, tests=5, n_changed=5)
    assert verdict.outcome == "INCONCLUSIVE" and verdict.detectable is None
    assert "5 paired queries cannot reach alpha 0.05 / 5 tests (smallest possible p 0.0625)" in verdict.reason
    assert "use at least 8 queries" in verdict.reason


def test_inconclusive_names_the_smallest_detectable_difference() -> None:
    test = PairedResult(n=30, mean_a=0.8, mean_b=0.77, diff=-0.03, ci95_low=-0.09, ci95_high=0.03, p_value=0.4)
    verdict = decide(METRIC, test, lower=False)
    assert verdict.outcome == "INCONCLUSIVE" and verdict.detectable == pytest.approx(0.06)
    assert "a difference under about 0.060 (half the CI's width) cannot be told from noise" in verdict.reason
    assert decide(METRIC, test, lower=False, rule=Rule(max_drop=0.05)).outcome == "PASS"  # within the allowed


def test_inconclusive_is_its_own_error_and_exit_code() -> None:
    assert issubclass(Inconclusive, OpenRagEvalError) and not issubclass(Inconclusive, AssertionError)
    assert exit_code(Inconclusive("x")) == EXIT_INCONCLUSIVE == 7


def test_compare_prints_the_verdict_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            caplog: pytest.LogCaptureFixture) -> None:
    a, b = _values(4, 0.3)
    with caplog.at_level(logging.INFO):
        code = main(["compare", str(_folder(tmp_path / "a", a)), str(_folder(tmp_path / "b", b)), "--output-dir",
                     str(tmp_path), "--fail-if-worse", METRIC, "--resamples", "2000"])
    assert code == 7
    table = capsys.readouterr().out
    assert "INCONCLUSIVE citation.f1: dropped 0.307" in table and "no significant difference" not in table
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "gates: INCONCLUSIVE (citation.f1 INCONCLUSIVE)"]
    rows = list(csv.DictReader((tmp_path / "compare.csv").open(encoding="utf-8")))
    assert rows[0]["verdict"] == "INCONCLUSIVE" and "cannot reach alpha" in rows[0]["reason"]


@pytest.fixture(scope="module")
def good_and_dont_know(tmp_path_factory: pytest.TempPathFactory) -> tuple[Results, Results]:
    import os

    from open_rag_eval import evaluate
    from tests.test_api import JUDGE, _outputs

    cwd = Path.cwd()
    try:
        os.chdir(tmp_path_factory.mktemp("dont-know"))
        good = _outputs(True, 8)
        bad = [dict(o, answer="I don't know.") for o in good]
        return evaluate(good, judge=JUDGE), evaluate(bad, judge=JUDGE)
    finally:
        os.chdir(cwd)


def test_eight_i_dont_know_answers_never_pass_against_the_baseline(
        good_and_dont_know: tuple[Results, Results]) -> None:
    good, bad = good_and_dont_know
    assert good.mean("no_answer.answered") == 1.0 and bad.mean("no_answer.answered") == 0.0
    with pytest.raises((AssertionError, Inconclusive)) as caught:
        assert_metrics(bad, baseline=good)  # the headline metrics, Holm across them
    assert "no_answer.answered" in str(caught.value)
