"""The table of judge tasks (open_rag_eval/core/judge_tasks.py) says true things: each task's prompt templates and
reply schema exist, every template sent to a judge and every schema file belongs to a task, each named parser is the
function it names, each grader a field of the controls' graders, and the labels are the ones the parsers give."""

from __future__ import annotations

import dataclasses
import importlib
from importlib import resources

import pytest

from open_rag_eval.core.judge_tasks import FAMILY_TASKS, TABLE, Tasks, tasks_of
from open_rag_eval.core.labels import FREE_TEXT, labels_of
from open_rag_eval.core.parsing import classify_no_answer, classify_support, classify_umbrela
from open_rag_eval.metrics.claims import Verdict
from open_rag_eval.metrics.graders import CONTROL_TASKS, Graders
from open_rag_eval.metrics.nuggets import ASSIGN_LABELS, IMPORTANCE_LABELS
from open_rag_eval.prompts import manifest, reply_schema


def test_each_name_is_its_key_and_written_once() -> None:
    names = [value for key, value in vars(Tasks).items() if key.isupper()]
    assert len(names) == len(set(names)) == len(TABLE)
    assert sorted(names) == sorted(TABLE) and all(TABLE[name].name == name for name in names)


def test_the_prompts_exist_and_every_judge_template_belongs_to_a_task() -> None:
    ids = {entry["id"] for entry in manifest()}
    named = {prompt for task in TABLE.values() for prompt in task.prompts}
    assert named <= ids, sorted(named - ids)
    sent = {entry["id"] for entry in manifest() if entry.get("kind") != "data"}
    assert sent - named == {"reask.corrective"}  # the corrective re-ask follows a reply of any task


def test_the_schemas_exist_and_every_schema_file_belongs_to_one_task() -> None:
    files = sorted(p.name for p in resources.files("open_rag_eval.prompts").joinpath("schemas").iterdir()
                   if p.name.endswith(".json"))
    named = sorted(task.schema for task in TABLE.values() if task.schema is not None)
    assert named == files
    for task in TABLE.values():
        asked = reply_schema(task.name)
        assert (asked is not None) == (task.schema is not None), task.name
    assert reply_schema(Tasks.UMBRELA, "json_object") == {  # the table's file, in the llama-cpp form
        "type": "json_object", "schema": {"type": "object", "additionalProperties": False,
                                          "properties": {"final_score": {"type": "string",
                                                                         "enum": ["0", "1", "2", "3"]}},
                                          "required": ["final_score"]}}
    assert reply_schema("criteria.tone") is None  # a criterion's own column is no task of the table


@pytest.mark.parametrize("name", sorted(TABLE))
def test_the_parser_named_is_a_function_of_its_module(name: str) -> None:
    module, _, function = TABLE[name].parser.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_controlled_tasks_name_their_graders() -> None:
    fields = {f.name for f in dataclasses.fields(Graders)}
    graded = {task.name for task in TABLE.values() if task.grader is not None}
    assert graded == set(CONTROL_TASKS)
    assert {TABLE[name].grader for name in CONTROL_TASKS} <= fields
    useful = Graders(useful=lambda *_: None)  # type: ignore[arg-type,return-value]
    assert useful.tasks() == [Tasks.CONTEXT_USEFUL] and useful.of(Tasks.UMBRELA) is None


def test_the_labels_are_the_parsers_labels() -> None:
    grades = [classify_umbrela(f"##final score: {g}").value for g in range(4)]
    assert TABLE[Tasks.UMBRELA].labels == tuple(str(grade[0]) for grade in grades if grade is not None)
    assert TABLE[Tasks.SUPPORT].labels == tuple(classify_support(text).value for text in
                                                ("Full Support", "Partial Support", "No Support"))
    assert TABLE[Tasks.NO_ANSWER].labels == (classify_no_answer("yes").value, classify_no_answer("no").value)
    assert IMPORTANCE_LABELS == ("vital", "okay") == TABLE[Tasks.NUGGET_IMPORTANCE].labels
    assert ASSIGN_LABELS == {"grade3": ("support", "partial_support", "not_support"),
                             "grade2": ("support", "not_support")}


def test_labels_of_reads_as_the_table_says() -> None:
    assert FREE_TEXT == {Tasks.NUGGET_CREATE, Tasks.GENERATE_QUERY, Tasks.CLAIM_EXTRACT, Tasks.CRITERIA_STEPS,
                         Tasks.ANSWER_QUESTIONS, Tasks.GUIDE_CLAIMS}
    assert labels_of(Tasks.UMBRELA, (2, True)) == ("2",)
    assert labels_of(Tasks.RUBRIC, (7, "a reason")) == ("7",)
    assert labels_of(Tasks.CRITERIA, ("yes", "a reason")) == ("yes",)
    assert labels_of(Tasks.ANSWER_RELEVANCE, (True, None)) == ("refusal",)
    assert labels_of(Tasks.ANSWER_RELEVANCE, (False, 1)) == ("1",)
    assert labels_of(Tasks.NUGGET_ASSIGN, ["support", "not_support"]) == ("support", "not_support")
    assert labels_of(Tasks.CLAIM_VERIFY, (Verdict(True, (1,)), Verdict(False))) == ("yes", "no")
    assert labels_of(Tasks.CONTEXT_USEFUL, False) == ("no",)
    assert labels_of(Tasks.GUIDE_ANSWER_RELEVANCE, 7.5) == ("7.5",)
    assert labels_of(Tasks.NUGGET_CREATE, ["a nugget"]) == ()
    assert labels_of(Tasks.SUPPORT, None) == ()


def test_a_family_rests_on_the_tables_tasks() -> None:
    assert tasks_of("nuggets.vital_strict") == (Tasks.NUGGET_CREATE, Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN)
    assert tasks_of("criteria.tone") == ("criteria.tone", Tasks.CRITERIA, Tasks.CRITERIA_STEPS)
    assert tasks_of("hhem.score") == () and tasks_of("unknown.value") is None
    # every task the run's metrics ask rests under a family (the test-set generator's questions are no metric)
    assert {task for tasks in FAMILY_TASKS.values() for task in tasks} == set(TABLE) - {Tasks.GENERATE_QUERY}
