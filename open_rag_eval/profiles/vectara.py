"""``profile: vectara`` -- vectara's open-rag-eval's own definitions, as its metrics documentation states them.

Each entry below is an evaluator option; docs/profiles.md sets every one beside our default and says why ours
differs. What the profile deliberately does NOT copy (no number is ever invented): a metric whose judge call failed
is missing with its reason, never the neutral 0.5 vectara's evaluator writes; a citation of a passage the output
does not contain is No Support (never skipped, so it cannot raise precision); an unparseable UMBRELA reply is grade 0
marked invalid and counted; empty vital or okay groups divide by their true size. Its prompt texts and its JSON-schema
reply formats are sent as it sends them; a reply is read by our parsers (the schema's value, or plain text).
"""

from __future__ import annotations

from open_rag_eval.profiles import Profile

__all__ = ["VECTARA"]

SEED = 42  # vectara's judge calls fix the sampling seed

VECTARA = Profile(
    name="vectara",
    summary="vectara open-rag-eval's own metric definitions (for comparing numbers with it)",
    options={
        "trec": {
            # its TREC evaluator runs every metric, HHEM included
            "metrics": ["umbrela", "nuggets", "citation", "no_answer", "hhem"],
            "statements": "between_markers",  # a statement is the text between two citation groups
            "umbrela": {
                # its UMBRELA sampling: the penalties are swapped relative to castorini's umbrela
                "temperature": 0.0, "top_p": 1.0, "presence_penalty": 0.5, "frequency_penalty": 0.0, "seed": SEED,
                "pad": False,  # P@k and AP@k are omitted (undefined) when k exceeds the number of passages
                "prompt": "vectara",  # its re-wrapped prompt, asking for a single integer
                "max_tokens": None,  # it sets no reply limit
                "response_format": "vectara",  # its JSON schema (an enum of the grades), stream: false
            },
            "nuggets": {
                "creation": "iterative",  # every relevant passage in one context, refined up to `iterations` times
                "iterations": 5,
                "pool": "output",  # nuggets are created from each output's own passages
                "no_answer_sentinel": True,
                "seed": SEED,
                "prompts": "vectara",  # its creator, scorer and assigner texts (sentinel instructions included)
                "max_tokens": None,
                "response_format": "vectara",
            },
            "citation": {
                "variant": "all_citations",  # every citation of every statement is judged
                "scoring": "per_passage",  # precision: mean over the cited passages of each passage's mean score
                "passage_text": "text",  # the passage as retrieved, without a title
                "temperature": 0.0, "seed": SEED,
                "prompt": "vectara",  # labels full_support / partial_support / no_support
                "response_format": "vectara",
            },
            # the no-answer prompt is vectara's in every profile; the profile adds its system message and reply format
            "no_answer": {"system": "vectara", "response_format": "vectara"},
            "hallucination": {
                "premise_max_chars": 8192,  # the passages joined by a space, cut at 8,192 characters
                "long_inputs": "truncate",
            },
        },
        "consistency": {
            "min_runs": 3,  # fewer than three runs of a query: no consistency scores for it
            # consistency_rouge_score: the `rouge` package's ROUGE-L F1 both ways, averaged (consistency.rougeL only)
            "rouge": {"implementation": "rouge", "measures": ["f1"]},
            "stats": ["mean", "median", "std", "variance", "cv", "iqr", "min", "max", "range", "cai"],
            "ddof": 0,  # population variance and standard deviation (numpy's default)
            "bertscore": {"model_type": "xlm-roberta-large", "lang": "en", "rescale_with_baseline": True},
        },
    },
)
