"""The head start of ``open-rag-eval eval`` (``judge.head_start``): the run's first judge requests, known from its
config file and the first rows of its input, sent while the program loads.

Only where those requests can be known exactly, from the config file as written and the standard library alone:

- the program's own ``eval --config FILE``, with none of ``--limit``, ``--shard``, ``--executor``, ``--ray-address``,
  ``--track``, ``--dry-run``;
- a config of ``input`` (a CSV in the one-row-per-passage layout), ``output_dir``, ``report``, ``diagnosis``,
  ``judge`` and one evaluator, ``trec``, that sets at most ``k_values`` and a ``metrics`` list with ``umbrela``,
  and no ``${VAR}``, YAML anchor or alias anywhere;
- a judge at an ``http://`` ``base_url`` (one endpoint) whose settings change neither a request nor its pacing
  (``ALLOWED_JUDGE``: no ``params``, rate limits, structured replies, recording...), and no cache file yet (a
  cached reply is never asked again);
- no proxy and no ``OPENAI_*`` setting in the environment (then the ``openai`` SDK builds the requests).

The requests are the UMBRELA gradings (default options) of the input's first ``max_concurrency`` distinct (query,
passage) pairs: the run asks every grading first, in that order (``TrecEvaluator._start_critical_path``). A run
that then asks otherwise loses nothing but the calls sent ahead, which ``finish`` reports.
tests/test_head_start.py holds this module's requests to the run's own.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from open_rag_eval.core.wire import NO_KEY, chat_body, chat_head, local_host, proxied, sdk_settings
from open_rag_eval.judge import head_start
from open_rag_eval.store.sqlite import setting_path
from open_rag_eval.judge.head_start import HeadStart

__all__ = ["ALLOWED_JUDGE", "UMBRELA_PARAMS", "UMBRELA_SYSTEM", "UMBRELA_TEMPLATE", "begin", "finish", "requests_of"]

log = logging.getLogger("open_rag_eval")

ALLOWED_TOP = frozenset({"input", "output_dir", "report", "diagnosis", "judge", "evaluators"})
ALLOWED_JUDGE = frozenset({"model", "base_url", "api_key_env", "max_concurrency", "max_retries", "timeout_s",
                           "max_reply_mb", "cache", "prices", "backoff_base_s", "backoff_cap_s", "retry_after_cap_s",
                           "adaptive_concurrency", "outage_after_failures", "outage_after_s", "health", "reask"})
ALLOWED_TREC = frozenset({"type", "k_values", "metrics"})
# the one-row-per-passage layout's columns (inputs.csv_layout's CSV_REQUIRED and CSV_OPTIONAL)
CSV_COLUMNS = frozenset({"query_id", "query", "query_run", "passage_id", "passage", "generated_answer",
                         "passage_title", "passage_score", "latency_ms", "refused", "relevant_ids",
                         "expected_keywords", "expected_refusal", "required_citations", "reference_answer",
                         "grounding_ids"})
# the UMBRELA request of metrics.umbrela's default options (UmbrelaOptions(), the default profile): its system
# message, template and sampling params, in the order they are sent
UMBRELA_SYSTEM = "You are a helpful assistant."
UMBRELA_TEMPLATE = "umbrela.bing_zeroshot"
UMBRELA_PARAMS: dict[str, float | int] = {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.5,
                                          "presence_penalty": 0.0, "max_tokens": 100}
DEFAULT_CACHE = ".open-rag-eval/cache.sqlite"
DEFAULTS: dict[str, Any] = {"model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY", "max_concurrency": 32,
                            "timeout_s": 60.0, "cache": DEFAULT_CACHE}  # judge.config.JudgeConfig's
MAX_ROWS = 20_000  # the first rows read for the pairs, at most
MAX_CONFIG_BYTES = 1 << 20


def begin(args: argparse.Namespace) -> None:
    """Start the head start of this ``eval`` when it can foresee the run's first requests (else do nothing)."""
    if not getattr(args, "whole_process", False) or args.dry_run or args.limit is not None or args.shard \
            or args.executor or args.ray_address or args.track:
        return
    try:
        planned = _plan(args.config)
    except Exception as error:  # noqa: BLE001  (a file the run will refuse with its own error, or anything else:
        log.debug("no head start (%s)", type(error).__name__)  # a head start never stops a run; no file text here)
        return
    if planned is not None:
        head_start.begin(planned)


def finish() -> None:
    """End the head start; a request it sent that the run never asked is said (the judge may have answered it)."""
    ended = head_start.finish()
    if ended is None:
        return
    sent, unclaimed = ended
    log.debug("head start: %d judge request(s) sent while the program loaded; the run asked %d of them", sent,
              sent - unclaimed)
    if unclaimed:
        log.warning("%d judge request(s) sent while the program loaded were not asked by the run (they may have been "
                    "answered and paid)", unclaimed)


def _plan(config_path: Path) -> HeadStart | None:
    import yaml  # noqa: PLC0415  (libyaml's loader: a few milliseconds)

    if config_path.stat().st_size > MAX_CONFIG_BYTES:
        return None
    text = config_path.read_text(encoding="utf-8")
    if "${" in text or "&" in text or "*" in text:  # an env reference, or YAML anchors and aliases: the config's
        return None  # own loader interpolates the one and bounds the other (a few lines can expand to gigabytes)
    config = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not _foreseeable(config):
        return None
    judge = {**DEFAULTS, **config["judge"]}
    base = config_path.resolve().parent
    url = urlsplit(judge["base_url"])
    if not _plain(url.scheme, url.netloc, url.path, url.query, url.fragment) or _cached(judge["cache"], base):
        return None
    key = os.environ.get(judge["api_key_env"], "").strip() or (NO_KEY if local_host(url.hostname or "") else "")
    if not key or proxied() or sdk_settings():
        return None
    head = chat_head(url.netloc.encode("ascii"), url.path.encode("ascii"), key)
    pairs = _first_pairs(setting_path(config["input"], base), judge["max_concurrency"])
    requests = list(requests_of(pairs, str(judge["model"]), head))
    if not requests:
        return None
    return HeadStart(url.hostname or "", url.port or 80, requests, connect_s=float(judge["timeout_s"]))


def requests_of(pairs: Iterator[tuple[str, str]], model: str, head: bytes) -> Iterator[bytes]:
    """The whole HTTP requests (``head`` from ``core.wire.post_head``) grading each (query, passage) pair."""
    from open_rag_eval.prompts import load  # noqa: PLC0415

    template = load(UMBRELA_TEMPLATE)
    for query, passage in pairs:
        messages = (("system", UMBRELA_SYSTEM), ("user", template.render(query=query, passage=passage)))
        body = chat_body(UMBRELA_PARAMS, model, messages)
        yield head + str(len(body)).encode("ascii") + b"\r\n\r\n" + body


def _foreseeable(config: Any) -> bool:
    if not isinstance(config, dict) or not set(config) <= ALLOWED_TOP or not isinstance(config.get("input"), str) \
            or not str(config["input"]).endswith(".csv"):
        return False
    judge, evaluators = config.get("judge"), config.get("evaluators")
    if not isinstance(judge, dict) or not set(judge) <= ALLOWED_JUDGE or not isinstance(judge.get("base_url"), str):
        return False
    if not (isinstance(judge.get("model", ""), str) and isinstance(judge.get("api_key_env", ""), str)
            and _whole(judge.get("max_concurrency", 1)) and isinstance(judge.get("cache", ""), (str, bool))
            and _number(judge.get("timeout_s", 1.0))):
        return False
    if not isinstance(evaluators, list) or len(evaluators) != 1 or not isinstance(evaluators[0], dict):
        return False
    trec = evaluators[0]
    metrics = trec.get("metrics", ["umbrela"])
    return trec.get("type") == "trec" and set(trec) <= ALLOWED_TREC and isinstance(metrics, list) \
        and "umbrela" in metrics


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 4096


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _plain(scheme: str, netloc: str, path: str, query: str, fragment: str) -> bool:
    """An ``http://`` URL whose host, port and path every HTTP library writes as given (lower case, no user, no
    default port, no character to escape)."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789.-:")
    return scheme == "http" and bool(netloc) and set(netloc) <= allowed and not netloc.endswith(":80") \
        and netloc.count(":") <= 1 and not query and not fragment and not netloc.startswith(("-", ".", ":")) \
        and set(path) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/")


def _cached(cache: str | bool, base: Path) -> bool:
    """Whether the judge cache named (``judge.cache.cache_path``) exists: its replies are not asked again."""
    if cache is False:
        return False
    name = DEFAULT_CACHE if cache is True else str(cache)
    return not name.strip() or setting_path(name, base).exists()


def _first_pairs(path: Path, count: int) -> Iterator[tuple[str, str]]:
    """The first ``count`` distinct (query, passage text) pairs of a CSV, in the order the run grades them."""
    seen: set[tuple[str, str]] = set()
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = csv.reader(handle, strict=True)
        header = [name.strip() for name in next(rows)]
        if not set(header) <= CSV_COLUMNS or len(set(header)) != len(header) or "passage" not in header \
                or "query" not in header:
            return
        query_at, passage_at = header.index("query"), header.index("passage")
        for number, cells in enumerate(rows):
            if number >= MAX_ROWS or len(seen) >= count:
                return
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                return  # the run refuses the file: nothing more is sent
            pair = (cells[query_at].strip(), cells[passage_at])
            if pair[0] and pair[1].strip() and pair not in seen:
                seen.add(pair)
                yield pair
