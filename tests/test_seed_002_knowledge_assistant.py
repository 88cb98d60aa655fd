"""An internal knowledge assistant's evaluation framework (Opik), rebuilt from its own text.

Its definitions: **Recall@5 / Recall@10** binary -- 1 if *any* expected file id is in the top k, and for refusal
cases (no expected files) 1 if retrieval is empty; **Recall-All@5 / @10** fractional -- the share of *all* expected
file ids in the top k; **Citation Compliance** 0.5 for a Sources section + 0.5 for at least
``required_citations_count`` citations; **Has Sources Section** a ``**Sources:**`` header; **Refusal Correctness**
1 when the system refuses exactly the out-of-scope queries, read from its ``refused`` flag. Its data: a JSONL set
(``id, query, intent, expected_file_ids, must_cite, required_citations_count, answer_style, max_entities,
is_out_of_scope, must_refuse, no_external_knowledge, allowed_uncertainty``) and ``file_id_mapping.json`` (file id ->
file name).

Ours: ``golden.hit@k`` with ``no_relevant: empty_retrieval``; our fractional ``golden.recall@k`` (our
``golden.recall_all@k`` is binary); ``lexical.citation_compliance``, ``lexical.has_sources``,
``lexical.refusal_correct``. The test rebuilds its "Latest Results" table (25 samples) and checks every figure.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from open_rag_eval.core.errors import InputError
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.inputs import read_outputs, read_query_set
from open_rag_eval.core.types import Passage, RAGOutput

SEED = {"k_values": [5, 10], "no_relevant": "empty_retrieval"}


def sample(qid: str, files: list[str], *, refuse: bool = False, required: int = 1) -> dict[str, object]:
    return {"id": qid, "query": f"Question {qid}?", "intent": "qa", "expected_file_ids": files,
            "must_cite": not refuse, "required_citations_count": 0 if refuse else required, "answer_style": "paragraph",
            "max_entities": 0, "is_out_of_scope": refuse, "must_refuse": refuse, "no_external_knowledge": True,
            "allowed_uncertainty": False}


def fillers(qid: str, n: int) -> list[str]:
    return [f"{qid}-other{i}" for i in range(n)]


def table_of_25(folder: Path) -> tuple[Path, Path, list[RAGOutput]]:
    """25 samples whose numbers are the framework's "Latest Results" table; files are named, labels use ids."""
    samples, outputs = [], []

    def add(qid: str, files: list[str], ranking: list[str], answer: str, *, refuse: bool = False,
            refused: bool = False, required: int = 1) -> None:
        samples.append(sample(qid, files, refuse=refuse, required=required))
        passages = tuple(Passage(id=f"{doc}.pdf", text=f"Contents of {doc}.") for doc in ranking)
        outputs.append(RAGOutput(query_id=qid, query=f"Question {qid}?", passages=passages, answer=answer,
                                 refused=refused))

    sources = "Revenue grew in 2025.\n\n**Sources:**\n- {0}.pdf\n"
    for i in range(18):  # one expected file, retrieved first; the citation listed only under Sources
        qid = f"q{i:02d}"
        add(qid, [f"id{qid}"], [f"id{qid}", *fillers(qid, 9)], sources.format(f"id{qid}"))
    # one expected file, cited in the text [1] but no Sources section: compliance 0.5
    add("q18", ["idq18"], ["idq18", *fillers("q18", 9)], "Revenue grew in 2025 [1].")
    # P: 1 of 3 expected files in the top 5 and in the top 10
    add("qP", ["idP1", "idP2", "idP3"], ["idP1", *fillers("qP", 9)], sources.format("idP1"))
    # Q: 3 of 5 in the top 5, 4 of 5 in the top 10; two citations required, two listed
    add("qQ", [f"idQ{n}" for n in range(1, 6)],
        ["idQ1", "idQ2", "x1", "idQ3", "x2", "idQ4", *fillers("qQ", 4)],
        "Revenue grew [1] and margins held [2].\n\n**Sources:**\n- idQ1.pdf\n- idQ2.pdf\n", required=2)
    # R: 1 of 2 in the top 5, both in the top 10
    add("qR", ["idR1", "idR2"], ["idR1", *fillers("qR", 5), "idR2", *fillers("qR2", 3)], sources.format("idR1"))
    # S: 2 of 3 in the top 5, all 3 in the top 10
    add("qS", ["idS1", "idS2", "idS3"], ["idS1", "idS2", *fillers("qS", 5), "idS3", *fillers("qS2", 2)],
        sources.format("idS1"))
    # two out-of-scope queries: nothing retrieved; one refuses, one answers anyway
    add("qX", [], [], "I couldn't find this in your documents.", refuse=True, refused=True)
    add("qY", [], [], "Revenue will triple next year.", refuse=True, refused=False)
    assert len(samples) == 25
    dataset = folder / "stock_eval_v1.jsonl"
    dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
    mapping = folder / "file_id_mapping.json"
    names = {f"id{s['id']}" for s in samples} | {f"id{c}{n}" for c in "PQRS" for n in range(1, 6)}
    mapping.write_text(json.dumps({name: f"{name}.pdf" for name in sorted(names)}))
    return dataset, mapping, outputs


def evaluate(outputs: list[RAGOutput], **options: object) -> dict[tuple[str, str], float | None]:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate(options))
    result = asyncio.run(evaluator.evaluate(outputs, Context()))
    return {(s.query_id, s.metric): s.value for s in result.scores}


def mean(rows: dict[tuple[str, str], float | None], metric: str) -> float:
    values = [v for (_, m), v in rows.items() if m == metric and v is not None]
    return sum(values) / len(values)


def test_the_dataset_and_mapping_are_read_directly(tmp_path: Path) -> None:
    dataset, _, _ = table_of_25(tmp_path)
    queries = {q.query_id: q for q in read_query_set(dataset)}
    assert queries["qQ"].labels.relevant_ids == {f"idQ{n}": 1 for n in range(1, 6)}
    assert queries["qQ"].labels.required_citations == 2
    assert queries["qQ"].labels.expected_refusal is False
    assert queries["qX"].labels.relevant_ids == {}  # an empty set, not "no labels"
    assert queries["qX"].labels.expected_refusal is True


def test_the_latest_results_table(tmp_path: Path) -> None:
    dataset, mapping, outputs = table_of_25(tmp_path)
    rows = evaluate(outputs, labels=str(dataset), id_map=str(mapping), **SEED)
    assert mean(rows, "golden.hit@5") == mean(rows, "golden.hit@10") == 1.0  # Recall@5 / @10: 1.0000
    assert mean(rows, "golden.recall@5") == pytest.approx(0.9240)  # Recall-All@5: 0.9240
    assert round(mean(rows, "golden.recall@10"), 4) == 0.9653  # Recall-All@10: 0.9653
    assert mean(rows, "lexical.citation_compliance") == pytest.approx(0.9400)  # Citation Compliance
    assert mean(rows, "lexical.has_sources") == pytest.approx(0.8800)  # Has Sources Section
    assert mean(rows, "lexical.refusal_correct") == pytest.approx(0.9600)  # Refusal Correctness
    assert {qid for (qid, m), v in rows.items() if m == "golden.hit@5"} == {o.query_id for o in outputs}  # 25 / 25


def test_our_defaults_give_other_numbers_under_other_names(tmp_path: Path) -> None:
    dataset, mapping, outputs = table_of_25(tmp_path)
    rows = evaluate(outputs, labels=str(dataset), id_map=str(mapping), k_values=[5, 10])
    assert mean(rows, "golden.hit@5") == pytest.approx(23 / 25)  # trec_eval: nothing relevant = no hit
    # our recall_all@k is binary (all expected files found), missing where nothing is expected: 19 of 23 at k = 5
    assert mean(rows, "golden.recall_all@5") == pytest.approx(19 / 23)
    assert rows[("qX", "golden.recall_all@5")] is None
    # without the file-id mapping, retrieved file names are not the expected ids: no hit at all
    unmapped = evaluate(outputs, labels=str(dataset), **SEED)
    assert unmapped[("q00", "golden.hit@5")] == 0.0


def test_citations_listed_only_under_sources_count(tmp_path: Path) -> None:
    out = RAGOutput(query_id="q", query="?", passages=(Passage(id="a.pdf", text="a"),),
                    answer="Two facts.\n\n**Sources:**\n- a.pdf\n- b.pdf\n")
    rows = evaluate([out.model_copy(update={"labels": out.labels.model_copy(update={"required_citations": 2})})])
    assert rows[("q", "lexical.has_sources")] == 1.0
    assert rows[("q", "lexical.citation_compliance")] == 1.0  # two entries listed, two required


def test_the_systems_refused_flag_wins_over_the_wording() -> None:
    from open_rag_eval.core.types import Labels

    polite = RAGOutput(query_id="q", query="?", answer="I could not find a definitive figure, but revenue rose.",
                       refused=False, labels=Labels(expected_refusal=False))
    rows = evaluate([polite])
    assert rows[("q", "lexical.refusal_correct")] == 1.0  # the lexical detector alone would call this a refusal
    rows = evaluate([polite.model_copy(update={"refused": None})])
    assert rows[("q", "lexical.refusal_correct")] == 0.0


def test_refused_is_read_from_jsonl_and_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "out.jsonl"
    jsonl.write_text(json.dumps({"query_id": "q", "query": "?", "answer": "No.", "refused": True}) + "\n")
    assert read_outputs(jsonl)[0].refused is True
    csv = tmp_path / "out.csv"
    csv.write_text("query_id,query,passage_id,passage,generated_answer,refused\nq,?,,,No.,yes\n")
    assert read_outputs(csv)[0].refused is True
    jsonl.write_text(json.dumps({"query_id": "q", "query": "?", "answer": "No.", "refused": "yes"}) + "\n")
    with pytest.raises(InputError, match=r"out\.jsonl:1: field 'refused'"):
        read_outputs(jsonl)


def test_an_unknown_field_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(sample("q1", ["a"])) + "\n" + json.dumps({**sample("q2", ["b"]), "expected": 1}) + "\n")
    with pytest.raises(InputError, match=r"set\.jsonl:2: field 'expected': unknown field"):
        read_query_set(path)


def test_the_http_connector_reads_the_refused_flag() -> None:
    from connectors.http import HttpConnector, HttpOptions, Malformed

    connector = HttpConnector(HttpOptions(url="http://127.0.0.1:9/q", refused_path="meta.refused"))
    reply = {"answer": "Not in your documents.", "passages": [], "meta": {"refused": True}}
    assert connector._output(reply, "q", "?", 1, 5.0).refused is True
    assert HttpConnector(HttpOptions(url="http://127.0.0.1:9/q"))._output(reply, "q", "?", 1, 5.0).refused is None
    with pytest.raises(Malformed, match="'meta.refused' is not true, false or null"):
        connector._output({**reply, "meta": {"refused": "yes"}}, "q", "?", 1, 5.0)
