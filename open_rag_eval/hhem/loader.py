"""Load HHEM-2.1-open from local files without executing any code shipped with the checkpoint.

The published checkpoint (``vectara/hallucination_evaluation_model``) holds ``config.json`` (the keys
``foundation`` -- the tokenizer and T5 architecture it was built on, ``google/flan-t5-base`` -- and
``prompt``) and weights named ``t5.transformer.*`` / ``t5.classifier.*``: a transformers
``T5ForTokenClassification`` wrapped in a ``t5.`` attribute. The T5 dimensions are not in ``config.json``,
so they are read off the tensors' shapes; the few values shapes cannot tell (activation, layer-norm epsilon,
relative-attention distance) come from ``config.json`` when present, else flan-t5's values.

The checkpoint stores the input embedding once (``transformer.shared.weight``); transformers 5 would
re-initialise the missing tied ``encoder.embed_tokens.weight``, so it is tied here explicitly.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import MissingDependency, ModelUnavailable

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_PROMPT",
    "DEFAULT_TOKENIZER",
    "LoadedHHEM",
    "ModelSpec",
    "clear_cache",
    "get_model",
    "resolve_model_dir",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "vectara/hallucination_evaluation_model"
DEFAULT_TOKENIZER = "google/flan-t5-base"
DEFAULT_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_TIED = "transformer.encoder.embed_tokens.weight"
_FLAN_DEFAULTS: dict[str, Any] = {
    "feed_forward_proj": "gated-gelu",
    "layer_norm_epsilon": 1e-6,
    "relative_attention_max_distance": 128,
}


@dataclass(frozen=True)
class ModelSpec:
    """Where the weights and tokenizer are and where to run them (the model-cache key)."""

    model_path: str | None = None
    model_name: str = DEFAULT_MODEL_NAME
    revision: str | None = None
    cache_dir: str | None = None
    tokenizer: str | None = None  # a directory or a hub name in the cache; None: the model dir, else `foundation`
    device: str = "auto"  # auto | cpu | cuda | cuda:N


@dataclass
class LoadedHHEM:
    model: Any  # transformers.T5ForTokenClassification, in eval mode
    tokenizer: Any  # a fast tokenizer (offsets are needed for chunking)
    prompt: str
    device: str
    model_dir: Path


_CACHE: dict[ModelSpec, LoadedHHEM] = {}
_LOCK = threading.Lock()


def hub_cache_dir(cache_dir: str | None = None) -> Path:
    """The hub cache, read from the environment at call time (not at import time)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _unavailable(spec: ModelSpec, problem: str) -> ModelUnavailable:
    where = f"'{spec.model_path}'" if spec.model_path else f"'{spec.model_name}' in the Hugging Face cache"
    return ModelUnavailable(
        f"HHEM weights unavailable ({problem}; looked for {where}). Download "
        f"'{spec.model_name}' (config.json + model.safetensors) and the tokenizer '{DEFAULT_TOKENIZER}' "
        "on a machine with network access (e.g. `huggingface-cli download <name>`), then set "
        "hallucination.model_path to the model directory (or HF_HOME to the cache holding it) and "
        "hallucination.tokenizer to the tokenizer directory; or use hallucination.backend: vectara_api"
    )


def resolve_model_dir(spec: ModelSpec) -> Path:
    """The directory holding config.json and the weights; raises ModelUnavailable with the fix."""
    if spec.model_path:
        directory = Path(spec.model_path).expanduser()
        if not (directory / "config.json").is_file():
            raise _unavailable(spec, "no config.json there")
    else:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            raise MissingDependency("huggingface_hub", "hhem") from None
        found = try_to_load_from_cache(
            spec.model_name, "config.json", cache_dir=str(hub_cache_dir(spec.cache_dir)), revision=spec.revision
        )
        if not isinstance(found, str):
            raise _unavailable(spec, "not in the cache")
        directory = Path(found).parent
    if not any((directory / name).is_file() for name in WEIGHT_FILES):
        raise _unavailable(spec, f"no {' or '.join(WEIGHT_FILES)} next to config.json")
    return directory


def read_state_dict(directory: Path) -> dict[str, Any]:
    """The checkpoint's tensors with the ``t5.`` wrapper prefix removed (no pickle code is executed)."""
    import torch

    if (directory / "model.safetensors").is_file():
        from safetensors.torch import load_file

        raw = load_file(str(directory / "model.safetensors"))
    else:
        raw = torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
    state = {key.removeprefix("t5."): value for key, value in raw.items()}
    if "transformer.shared.weight" not in state or "classifier.weight" not in state:
        raise ModelUnavailable(f"{directory}: not an HHEM/T5 token-classification checkpoint (tensor names differ)")
    return state


def t5_config_from(state: dict[str, Any], config: dict[str, Any]) -> Any:
    """A T5Config whose dimensions come from the tensors' shapes (HHEM's config.json has none)."""
    from transformers import T5Config

    vocab, d_model = state["transformer.shared.weight"].shape
    prefix = "transformer.encoder.block."
    layers = {int(key[len(prefix):].split(".")[0]) for key in state if key.startswith(prefix)}
    attention = prefix + "0.layer.0.SelfAttention."
    buckets, heads = state[attention + "relative_attention_bias.weight"].shape
    gated = prefix + "0.layer.1.DenseReluDense.wi_0.weight" in state
    d_ff = state[prefix + "0.layer.1.DenseReluDense." + ("wi_0" if gated else "wi") + ".weight"].shape[0]
    extra = {key: config.get(key, default) for key, default in _FLAN_DEFAULTS.items()}
    if not gated and "feed_forward_proj" not in config:
        extra["feed_forward_proj"] = "relu"
    extra["num_labels"] = int(state["classifier.weight"].shape[0])
    return T5Config(
        vocab_size=int(vocab), d_model=int(d_model), d_kv=int(state[attention + "q.weight"].shape[0]) // int(heads),
        d_ff=int(d_ff), num_layers=len(layers), num_heads=int(heads), relative_attention_num_buckets=int(buckets),
        dropout_rate=0.0, classifier_dropout=0.0, is_encoder_decoder=False, use_cache=False, **extra,
    )


def build_model(state: dict[str, Any], config: dict[str, Any]) -> Any:
    """transformers' own T5ForTokenClassification with the checkpoint's tensors, embeddings tied explicitly."""
    import torch
    from transformers import T5ForTokenClassification

    with torch.device("meta"):
        model = T5ForTokenClassification(t5_config_from(state, config))
    state = {key: value for key, value in state.items() if key != _TIED}
    expected = set(model.state_dict()) - {_TIED}
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ModelUnavailable(
            f"checkpoint does not match a T5 token classifier: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    model.load_state_dict(state, strict=False, assign=True)
    model.transformer.encoder.embed_tokens.weight = model.transformer.shared.weight
    return model.eval()


def load_tokenizer(spec: ModelSpec, model_dir: Path, config: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    location = spec.tokenizer
    if location is None:
        location = str(model_dir) if (model_dir / "tokenizer.json").is_file() else config.get("foundation")
    location = location or DEFAULT_TOKENIZER
    # the model dir's config.json describes HHEM, not a tokenizer class: read its tokenizer.json directly
    loader = PreTrainedTokenizerFast if location == str(model_dir) else AutoTokenizer
    try:
        tokenizer = loader.from_pretrained(
            location, local_files_only=True, cache_dir=str(hub_cache_dir(spec.cache_dir))
        )
    except (OSError, ValueError) as error:
        raise ModelUnavailable(
            f"HHEM tokenizer '{location}' unavailable offline ({type(error).__name__}); download it "
            f"(the real model uses '{DEFAULT_TOKENIZER}') and set hallucination.tokenizer to its directory"
        ) from None
    tokenizer.padding_side = "right"  # the score is read at position 0
    if not getattr(tokenizer, "is_fast", False):
        raise ModelUnavailable(f"HHEM tokenizer '{location}' has no tokenizer.json (a fast tokenizer is needed)")
    return tokenizer


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelUnavailable(f"hallucination.device is '{device}' but torch sees no CUDA device; use auto or cpu")
    return device


def load(spec: ModelSpec) -> LoadedHHEM:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise MissingDependency(error.name or "torch", "hhem") from None
    model_dir = resolve_model_dir(spec)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    device = pick_device(spec.device)
    model = build_model(read_state_dict(model_dir), config).to(device)
    tokenizer = load_tokenizer(spec, model_dir, config)
    prompt = config.get("prompt") or DEFAULT_PROMPT
    if "{text1}" not in prompt or "{text2}" not in prompt:
        raise ModelUnavailable(f"{model_dir / 'config.json'}: 'prompt' lacks {{text1}} / {{text2}}")
    logger.info("HHEM loaded from %s on %s", model_dir.name, device)
    return LoadedHHEM(model=model, tokenizer=tokenizer, prompt=prompt, device=device, model_dir=model_dir)


def get_model(spec: ModelSpec) -> LoadedHHEM:
    """The process-wide model for ``spec``: loaded once, then shared (thread-safe)."""
    with _LOCK:
        if spec not in _CACHE:
            _CACHE[spec] = load(spec)
        return _CACHE[spec]


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
