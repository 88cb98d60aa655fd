"""What a judge reply *is*: the one place that decides it, for every HTTP status and every body shape.

A reply is exactly one of:

- a **judgment**: text for the method's parser (reasoning blocks removed, text parts of a list joined);
- a **refusal**: the model declined in words (``message.refusal``); no method grades a refusal, so it is a failed
  judgment whose reason says the judge refused;
- a **failure** with a reason: an error status, a body that is not a chat completion, an empty or null content,
  a reply cut by ``finish_reason: length`` or stopped by ``content_filter``, or a prompt that cannot fit the
  declared context. A failure is never a grade: metrics record a missing value with this reason.

Failures carry what the client does next: ``retry`` (429, 408, 409, 5xx, a body that is not a chat completion),
``fail`` (this judgment is lost, the next may work) or ``down`` (every later call would fail too: auth, no such
model, no quota). ``overload`` marks failures that mean "too much at once" (429, context overflow), which lower the
adaptive concurrency. Usage is checked here too: token counts that are missing, not integers, negative or absurd
are ``None`` (unknown), never 0. A judgment also carries the log-probabilities of its tokens where the reply has them
(``choices[0].logprobs.content[*]``: each token and its ``top_logprobs``); a shape that cannot be read whole is none.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from open_rag_eval.core.redaction import cut
from open_rag_eval.judge.base import TokenLogprobs

__all__ = ["MAX_TOKENS", "Failure", "Judgment", "Usage", "classify_body", "classify_status", "error_fields",
           "format_rejected", "is_context_overflow", "read_logprobs", "read_usage", "strip_reasoning", "success_body"]

MAX_TOKENS = 10**9  # token counts above this are not real usage
_RETRY_STATUS = {408, 409, 429}
_THINK_PAIR = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_OVERFLOW_CODES = {"context_length_exceeded", "string_above_max_length", "request_too_large"}
_OVERFLOW_WORDS = ("context length", "context window", "context size", "maximum context", "too many tokens",
                   "prompt is too long", "input is too long", "reduce the length")
_UNSUPPORTED_WORDS = ("unsupported parameter", "unsupported value", "not supported", "unrecognized request argument",
                      "extra inputs are not permitted", "unknown parameter")


def strip_reasoning(text: str) -> str:
    """Remove reasoning blocks: paired tags, a cut-off opening tag (drops the rest), a lone closing tag."""
    text = _THINK_PAIR.sub("", text)
    opening = _THINK_OPEN.search(text)
    if opening:
        text = text[: opening.start()]
    closings = list(_THINK_CLOSE.finditer(text))
    if closings:
        text = text[closings[-1].end():]
    return text.strip()


# the reason of a reply whose content is blank (the judge answered, with nothing): a method that defines an empty
# answer (no claim listed) can tell it from a failed call by this text
BLANK = "empty reply from the judge (empty content"

@dataclass(frozen=True)
class Usage:
    """Token counts of one reply; ``None`` when the reply did not report them (or reported nonsense)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    problem: str | None = None  # why the counts are unknown

    @property
    def known(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


@dataclass(frozen=True)
class Judgment:
    text: str  # reasoning removed: what the method parses
    raw: str  # as the model wrote it (what the cache keeps)
    usage: Usage
    fingerprint: str | None
    finish_reason: str | None
    logprobs: TokenLogprobs | None = None  # where the reply carries them (asked with ``logprobs: true``)


@dataclass(frozen=True)
class Failure:
    kind: str  # "retry" | "fail" | "down" | "refuse"
    reason: str
    retry_after: float | None = None
    overload: bool = False  # too much at once: lowers the adaptive concurrency
    rate_limited: bool = False  # a 429: the endpoint says so now (not of the load when the request was sent)
    usage: Usage | None = None  # a 200 that failed still used (and cost) tokens
    timed_out: bool = False  # no complete reply within the deadline


def _token_count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    return int(value) if 0 <= value <= MAX_TOKENS else None


def read_usage(body: Any) -> Usage:
    """The reply's token counts: unknown (``None``) when missing, not whole numbers, negative or above 10^9."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if usage is None:
        return Usage(None, None, "the reply reported no token usage")
    if not isinstance(usage, dict):
        return Usage(None, None, "invalid usage in the reply (not an object)")
    prompt, completion = _token_count(usage.get("prompt_tokens")), _token_count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        shown = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")}
        return Usage(None, None, f"invalid usage in the reply {_short(repr(shown), 120)}")
    return Usage(prompt, completion)


def read_logprobs(choice: dict[str, Any]) -> TokenLogprobs | None:
    """A choice's token log-probabilities (``logprobs.content``: ``{"token", "top_logprobs": [{"token",
    "logprob"}]}`` each); None when there are none, or when a token cannot be read (the positions would not line up).
    An alternative whose log-probability is not a number is left out; one that is not finite (NaN, infinity) is
    kept as it came, for its reader to refuse (``scoring.criteria.logprob_problem``)."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    for item in content:
        token = item.get("token") if isinstance(item, dict) else None
        if not isinstance(token, str):
            return None
        top = item.get("top_logprobs")
        alternatives = tuple((alt["token"], _as_float(alt["logprob"])) for alt in (top if isinstance(top, list) else ())
                             if isinstance(alt, dict) and isinstance(alt.get("token"), str)
                             and _number(alt.get("logprob")))
        tokens.append((token, alternatives))
    return tuple(tokens)


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float: not a finite log-probability
        return math.inf if value > 0 else -math.inf


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text_of(content: Any) -> str | None:
    """A string content, or the text of a list of content parts (``{"type": "text", "text": ...}``) joined;
    ``None`` when there is no text. A bare string in the list is no content part: it is not read as the reply."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def classify_body(body: Any) -> Judgment | Failure:
    """A 200 reply's body: a judgment, a refusal, or a failure with its reason. Never raises."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Failure("retry", "malformed reply from the judge (the reply is not a chat completion)")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        return Failure("retry", "malformed reply from the judge (the reply has no message)")
    usage = read_usage(body)
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    fingerprint = body.get("system_fingerprint")
    fingerprint = fingerprint if isinstance(fingerprint, str) else None
    raw = _text_of(message.get("content"))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        return Failure("refuse", f"the judge refused: {_short(refusal)}", usage=usage)
    if finish == "content_filter":
        return Failure("fail", "the endpoint's content filter stopped the reply (finish_reason: content_filter)",
                       usage=usage)
    if finish == "length":
        spent = "" if usage.completion_tokens is None else f" after {usage.completion_tokens} tokens"
        return Failure("fail", f"the reply was cut off by the token limit{spent} (finish_reason: length); a "
                               "reasoning model may have spent it thinking: see judge.max_tokens_param", usage=usage)
    if raw is None:
        shape = "null" if "content" in message and message["content"] is None else (
            "missing" if "content" not in message else f"{type(message['content']).__name__} without text")
        return Failure("fail", f"empty reply from the judge (content {shape}, finish_reason={finish})", usage=usage)
    text = strip_reasoning(raw)
    if not text:
        what = "only reasoning" if raw.strip() else BLANK.removeprefix("empty reply from the judge (")
        return Failure("fail", f"empty reply from the judge ({what}, finish_reason={finish})", usage=usage)
    return Judgment(text, raw, usage, fingerprint, finish, read_logprobs(choice))


def success_body(content_type: str, content: bytes) -> Any:
    """A 2xx reply's body as ``classify_body`` reads it: parsed JSON when the content type says JSON (raises
    ``ValueError`` or ``RecursionError`` when it is not), else the text (which is no chat completion)."""
    if not content_type.split(";", 1)[0].endswith("json"):
        return content.decode("utf-8", "replace")
    return json.loads(content)


def error_fields(status: int, text: str) -> tuple[str | None, Any, str]:
    """An error reply's ``(code, param, message)`` from its body text (JSON or not), for ``classify_status``: the
    message is the body's ``error.message`` (or ``message``), else ``Error code: STATUS``."""
    body: Any = text.strip()
    try:
        body = json.loads(body)
    except (ValueError, RecursionError):
        pass
    data = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(data, dict):
        return None, None, f"Error code: {status}"
    inner = data.get("error", data)
    message = inner.get("message") if isinstance(inner, dict) else None
    if not isinstance(message, str):
        message = data["message"] if isinstance(data.get("message"), str) else f"Error code: {status}"
    code = data.get("code")
    return (None if code is None else str(code)), data.get("param"), message


def is_context_overflow(status: int, code: Any, message: str) -> bool:
    """The prompt does not fit the model's context (413, or a 400 saying so in its code or words)."""
    if status == 413 or (isinstance(code, str) and code in _OVERFLOW_CODES):
        return True
    lowered = message.lower()
    return status in (400, 422) and any(word in lowered for word in _OVERFLOW_WORDS)


def unsupported_param(code: Any, param: Any, message: str) -> str | None:
    """The parameter an endpoint rejected as unsupported, or None when the rejection is about something else."""
    named = code in ("unsupported_parameter", "unsupported_value") or any(
        word in message.lower() for word in _UNSUPPORTED_WORDS)
    if not named:
        return None
    if isinstance(param, str) and param:
        return param
    quoted = re.search(r"['\"`]([A-Za-z_][A-Za-z0-9_.]*)['\"`]", message)
    return quoted.group(1) if quoted else "?"


_FORMS = {"json_schema": ('{"type": "json_schema", "json_schema": ...} (OpenAI\'s form)',
                          "set judge.structured: json_object (the schema beside json_object, as llama-cpp-python's "
                          "server takes it)"),
          "json_object": ('{"type": "json_object", "schema": ...}',
                          "set judge.structured: json_schema (OpenAI's form)")}


def format_rejected(status: int, param: Any, message: str, sent: Any) -> Failure | None:
    """An endpoint that does not take the request's ``response_format`` (``sent``): an HTTP 400, 422 or 500 whose
    error names it (llama-cpp-python's server answers OpenAI's form with a 500 validation error naming
    ``response_format``). Every later call would be refused the same way, so the run stops at once (``down``)
    saying what to set; None for any other error."""
    named = param == "response_format" or any(word in message.lower() for word in ("response_format",
                                                                                  "response format"))
    if status not in (400, 422, 500) or not named:
        return None
    form = sent.get("type") if isinstance(sent, dict) else None
    shown, other = _FORMS.get(str(form), (f"{cut(json.dumps(sent), 80)}", "set judge.structured to the form it "
                                                                           "takes"))
    return Failure("down", f"the judge endpoint does not take response_format {shown} (HTTP {status}: "
                           f"{_short(' '.join(message.split()), 160)}); {other}, or leave judge.structured unset for text replies "
                           "(an evaluator's response_format: text for a profile's schemas)")


def classify_status(status: int, code: Any, param: Any, message: str, *, model: str, key_name: str,
                    retry_after: float | None = None) -> Failure:
    """An error status: retried, failed (this judgment only, with the server's reason) or down (every call)."""
    message = _short(message)
    if status == 429 and code == "insufficient_quota":
        return Failure("down", f"the judge account has no quota left (HTTP 429: {message})")
    if status in _RETRY_STATUS or status >= 500:
        return Failure("retry", f"HTTP {status}: {message}", retry_after, overload=status == 429,
                       rate_limited=status == 429)
    if status in (401, 403):
        return Failure("down", f"the judge endpoint refused the credentials (HTTP {status}: {message}); "
                               f"check the key in the environment variable {key_name}")
    if status == 404:
        return Failure("down", f"the judge endpoint has no such model or path (HTTP 404: {message}); "
                               f"check judge.model ('{model}') and judge.base_url")
    if is_context_overflow(status, code, message):
        return Failure("fail", f"the prompt does not fit the judge's context (HTTP {status}: {message}); set "
                               "judge.context_tokens to skip such prompts without a call", overload=True)
    unsupported = unsupported_param(code, param, message)
    if unsupported is not None:
        hint = {"max_tokens": "set judge.max_tokens_param: max_completion_tokens (reasoning models need it)",
                "max_completion_tokens": "set judge.max_tokens_param: max_tokens"}.get(
            unsupported, "remove it from judge.params or add it to judge.drop_params")
        return Failure("fail", f"the endpoint rejected the parameter '{unsupported}' for model '{model}' "
                               f"(HTTP {status}: {message}); {hint}")
    return Failure("fail", f"HTTP {status}: {message}")


def _short(text: str, limit: int = 300) -> str:
    return cut(str(text), limit)  # the one redaction point, before the cut
