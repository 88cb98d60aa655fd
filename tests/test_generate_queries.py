"""`open-rag-eval generate-queries`: through the CLI on the simulated judge and on misbehaving loopback judges."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval import prompts
from open_rag_eval.generation.corpus import read_corpus
from open_rag_eval.generation.testset import jaccard, normalise, parse_reply, request_for
from open_rag_eval.inputs import read_queries
from open_rag_eval.judge.sim_answer import answer, generated_question
from tests.openai_server import FAST, Reply, ScriptedServer, completion_body

BIO = ("Photosynthesis converts light energy into chemical energy in plants. Chlorophyll absorbs light.\n\n"
       "The Calvin cycle fixes carbon dioxide into sugars inside the chloroplast stroma.\n")
PARIS = ("The Eiffel Tower was completed in 1889 for the World Fair in Paris.\n\n"
         "Gustave Eiffel's company designed and built the iron lattice tower.\n")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "generate-queries", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def simulated(tmp_path: Path) -> Path:
    config = tmp_path / "judge.yaml"
    config.write_text("judge:\n  model: gpt-4o-mini\n  cache: false\n  simulated: {}\n")
    return config


def folder(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "bio.md").write_text(BIO)
    (corpus / "sub" / "paris.txt").write_text(PARIS)
    (corpus / "ignored.pdf").write_bytes(b"%PDF")
    return corpus


def loopback(base_url: str, tmp_path: Path, **judge: Any) -> Path:
    config = tmp_path / "loopback.yaml"
    settings = {"model": "test-model", "base_url": base_url, "cache": False, "max_retries": 0, **FAST, **judge}
    config.write_text(json.dumps({"judge": settings}))  # JSON is YAML
    return config


def test_a_folder_becomes_stable_paragraph_passages(tmp_path: Path) -> None:
    passages = read_corpus(folder(tmp_path))
    assert [p.id for p in passages] == ["bio.md#1", "bio.md#2", "sub/paris.txt#1", "sub/paris.txt#2"]
    assert passages[1].text == "The Calvin cycle fixes carbon dioxide into sugars inside the chloroplast stroma."
    assert [p.id for p in read_corpus(tmp_path / "corpus", "file")] == ["bio.md", "sub/paris.txt"]


def test_the_file_is_connector_input_with_golden_labels_and_answers(tmp_path: Path) -> None:
    corpus = folder(tmp_path)
    done = cli("--corpus", str(corpus), "--n", "10", "--config", str(simulated(tmp_path)), "--with-answers",
               "--output", "q.csv", "--qrels", "q.qrels", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 passage(s) of 4 asked, 4 question(s) generated, 0 dropped as duplicates, 0 failed" in done.stderr
    pairs = read_queries(tmp_path / "q.csv")  # what the connector reads
    assert len(pairs) == 4
    import csv

    rows = list(csv.DictReader((tmp_path / "q.csv").open()))
    assert list(rows[0]) == ["query_id", "query", "relevant_ids", "reference_answer"]
    texts = {p.id: p.text for p in read_corpus(corpus)}
    for row, (query_id, query) in zip(rows, pairs):
        assert (row["query_id"], row["query"]) == (query_id, query)
        source = texts[row["relevant_ids"]]  # the label is the passage the question was written from
        assert query == generated_question(source)
        assert row["reference_answer"] and row["reference_answer"] in source
    assert sorted(r["relevant_ids"] for r in rows) == sorted(texts)
    qrels = (tmp_path / "q.qrels").read_text().splitlines()
    assert qrels == [f"{r['query_id']} 0 {r['relevant_ids']} 1" for r in rows]


def test_the_outputs_csv_layout_reads_the_labels(tmp_path: Path) -> None:
    """relevant_ids is the outputs layout's golden-label column: the generated file plus answers is scorable."""
    from open_rag_eval.inputs import read_outputs

    csv_corpus = tmp_path / "c.csv"
    csv_corpus.write_text("id,text,title\nd1,Saturn has prominent rings made of ice.,Saturn\n")
    done = cli("--corpus", str(csv_corpus), "--n", "1", "--config", str(simulated(tmp_path)), "--output", "q.csv",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header, row = (tmp_path / "q.csv").read_text().splitlines()
    assert header == "query_id,query,relevant_ids"
    outputs = tmp_path / "outputs.csv"
    outputs.write_text(f"{header},passage_id,passage,generated_answer\n{row},d1,Saturn has rings.,Saturn has rings [1].\n")
    assert dict(read_outputs(outputs)[0].labels.relevant_ids) == {"d1": 1}


def test_duplicates_and_near_duplicates_are_dropped_and_counted(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\n"
                      "a,apple banana cherry damson\n"
                      "b,Apple banana cherry damson!\n"  # the same question, normalised
                      "c,apple banana cherry elder\n"  # 8 of 10 words shared: Jaccard 0.8
                      "d,quince rowan sloe walnut\n")
    done = cli("--corpus", str(corpus), "--n", "4", "--config", str(simulated(tmp_path)), "--output", "q.csv",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 passage(s) of 4 asked, 2 question(s) generated, 2 dropped as duplicates, 0 failed" in done.stderr
    assert len(read_queries(tmp_path / "q.csv")) == 2


def test_normalise_and_jaccard() -> None:
    assert normalise("  What is said about X-ray, and  Y? ") == "what is said about x ray and y"
    assert jaccard("What is said about a, b, c and d?", "what is said about a b c and e") == pytest.approx(0.8)
    assert jaccard("a b c d", "a b c e") == pytest.approx(3 / 5)


def test_the_sample_is_seeded(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
             "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]
    corpus.write_text("id,text\n" + "".join(f"p{i},{w} {w}ian {w}ese {w}land\n" for i, w in enumerate(words)))
    config = str(simulated(tmp_path))
    runs = {}
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        done = cli("--corpus", str(corpus), "--n", "5", "--seed", seed, "--config", config, "--output", name,
                   cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        runs[name] = (tmp_path / name).read_bytes()
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]
    assert len(read_queries(tmp_path / "a")) == 5


def test_failures_are_counted_never_made_up(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        if "BROKEN" in prompt:
            return Reply.ok("Sure! Here is a question: what is broken?")
        if "EMPTY" in prompt:
            return Reply.ok('{"question": "  "}')
        if "REFUSE" in prompt:
            return Reply.error(400, "content policy")
        return Reply(200, completion_body('{"question": "Which planet has rings?"}'))

    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\nok,Saturn has rings.\nb,BROKEN text\ne,EMPTY text\nr,REFUSE text\n")
    with ScriptedServer(responder=respond) as server:
        done = cli("--corpus", str(corpus), "--n", "4", "--config", str(loopback(server.base_url, tmp_path)),
                   "--output", "q.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 passage(s) of 4 asked, 1 question(s) generated, 0 dropped as duplicates, 3 failed" in done.stderr
    assert "b: unparseable reply: the reply is not one JSON object" in done.stderr
    assert "e: unparseable reply: the reply has no non-empty 'question' string" in done.stderr
    assert "r: judge call failed" in done.stderr
    assert "judge: 4 call(s), 0 cache hit(s), 1 failed call(s)" in done.stderr  # the 400; the rest got replies
    assert read_queries(tmp_path / "q.csv") == [(read_queries(tmp_path / "q.csv")[0][0], "Which planet has rings?")]


def test_nothing_generated_writes_nothing_and_exits_6(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\na,one\nb,two\n")
    with ScriptedServer(default=Reply.ok("no json here")) as server:
        done = cli("--corpus", str(corpus), "--n", "2", "--config", str(loopback(server.base_url, tmp_path)),
                   "--output", "q.csv", cwd=tmp_path)
    assert done.returncode == 6, done.stderr
    assert "2 failed" in done.stderr and "nothing written" in done.stderr
    assert not (tmp_path / "q.csv").exists()


def test_an_unusable_judge_exits_4_and_writes_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\na,one\n")
    with ScriptedServer(default=Reply.error(401, "bad key")) as server:
        done = cli("--corpus", str(corpus), "--n", "1", "--config", str(loopback(server.base_url, tmp_path)),
                   "--output", "q.csv", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert not (tmp_path / "q.csv").exists()


def test_replies_are_cached_like_every_judge_call(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text\na,Saturn has rings.\nb,Mars is red.\n")
    replies = iter(['{"question": "Which planet has rings?"}', '{"question": "Which planet is red?"}'])
    with ScriptedServer(responder=lambda body: Reply.ok(next(replies))) as server:
        config = loopback(server.base_url, tmp_path, cache="cache.sqlite", max_concurrency=1)
        first = cli("--corpus", str(corpus), "--n", "2", "--config", str(config), "--output", "1.csv", cwd=tmp_path)
        second = cli("--corpus", str(corpus), "--n", "2", "--config", str(config), "--output", "2.csv", cwd=tmp_path)
        assert first.returncode == second.returncode == 0, first.stderr + second.stderr
        assert len(server.requests) == 2  # the second run was answered from the cache
    assert "judge: 2 call(s), 0 cache hit(s), 0 failed call(s), 20 prompt + 4 completion tokens" in first.stderr
    assert "judge: 0 call(s), 2 cache hit(s), 0 failed call(s)" in second.stderr
    assert (tmp_path / "1.csv").read_bytes() == (tmp_path / "2.csv").read_bytes()


def test_dry_run_plans_calls_and_cost_and_calls_nothing(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        config = loopback(server.base_url, tmp_path, model="gpt-4o-mini")
        done = cli("--corpus", str(folder(tmp_path)), "--n", "3", "--config", str(config), "--dry-run",
                   "--output", "q.csv", cwd=tmp_path)
        assert server.requests == []
    assert done.returncode == 0, done.stderr
    assert "planned judge calls: 3" in done.stdout
    assert "estimated cost with gpt-4o-mini: $" in done.stdout
    assert not (tmp_path / "q.csv").exists()


def test_the_prompts_are_our_own_versioned_data() -> None:
    for template_id, digest in (
        ("generation.query", "a227095e068c88c34c0ec574b6a30ef49910767498269d3f7d810ea86bdab543"),
        ("generation.query_answer", "61bb1fae7e1855c1ba20620a8622358dea843d33bbe57bbe25487b1705499f58"),
    ):
        template = prompts.load(template_id)
        assert template.sha256 == digest == prompts.prompt_hashes()[template_id]
        assert "written by this project" in template.source
    request = request_for(read_corpus_passage(), with_answers=False)
    assert request.prompt_version == prompts.load("generation.query").sha256
    assert "Passage:\nSaturn {has} rings.\n" in request.prompt  # braces in a passage are harmless


def read_corpus_passage() -> Any:
    from open_rag_eval.generation.corpus import CorpusPassage

    return CorpusPassage("d1", "Saturn {has} rings.")


def test_the_simulated_judge_answers_the_prompt_deterministically() -> None:
    passage = read_corpus_passage()
    for with_answers in (False, True):
        reply = answer(request_for(passage, with_answers).messages)
        question, reference = parse_reply(reply, with_answers)
        assert question == "What is said about saturn and rings?"  # "has" is a stop word
        assert reference == ("Saturn {has} rings." if with_answers else "")


def test_strict_parsing() -> None:
    assert parse_reply('```json\n{"question": "Why?"}\n```', False) == ("Why?", "")
    for bad in ('["Why?"]', '{"question": 3}', 'question: Why?', '{"question": "Why?"} extra'):
        with pytest.raises(ValueError):
            parse_reply(bad, False)
    with pytest.raises(ValueError, match="'answer'"):
        parse_reply('{"question": "Why?"}', True)


@pytest.mark.parametrize(("setup", "expected"), [
    (lambda p: p / "missing", "missing: no such corpus file or folder"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "empty: no .txt or .md files in the corpus folder"),
    (lambda p: (p / "c.csv").write_text("id,body\na,x\n") and p / "c.csv", "c.csv:1: field 'text': missing column"),
    (lambda p: (p / "c.csv").write_text("id,text\na,x\na,y\n") and p / "c.csv",
     "c.csv:3: field 'id': duplicate passage id 'a' (first at line 2)"),
    (lambda p: (p / "c.csv").write_text("id,text\na,\n") and p / "c.csv", "c.csv:2: field 'text': empty passage text"),
    (lambda p: (p / "c.json").write_text("{}") and p / "c.json", "unsupported corpus 'c.json'"),
    (lambda p: (p / "q.csv").write_text("id,text\na,x\n") and p / "q.csv", "the output would overwrite the corpus"),
])
def test_bad_corpus_is_one_line_and_exit_3(tmp_path: Path, setup: Any, expected: str) -> None:
    corpus = setup(tmp_path)
    done = cli("--corpus", str(corpus), "--n", "2", "--config", str(simulated(tmp_path)), "--output", "q.csv",
               cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    assert not (tmp_path / "q.csv").exists() or (tmp_path / "q.csv").read_text() == "id,text\na,x\n"


def test_the_readme_examples_are_valid_commands(tmp_path: Path) -> None:
    """The README's generate-queries lines parse, and run on the simulated judge with their own flags."""
    import shlex

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Generate a test set", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line.split("#")[0]) for line in section.replace("\\\n", " ").splitlines() if line.strip()]
    assert len(commands) == 2 and all(c[:2] == ["open-rag-eval", "generate-queries"] for c in commands)
    folder(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "trec.yaml").write_text(simulated(tmp_path).read_text())
    for command in commands:
        done = cli(*command[2:], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert len(read_queries(tmp_path / "queries.csv")) == 4
    assert len((tmp_path / "queries.qrels").read_text().splitlines()) == 4
