"""A tiny randomly initialised model with HHEM's layout, for tests and benchmarks (its scores mean nothing).

``write_tiny_hhem(directory)`` saves what the real checkpoint holds -- ``config.json`` with ``foundation`` and
``prompt`` only, ``model.safetensors`` with ``t5.``-prefixed names and no ``encoder.embed_tokens`` copy -- plus
a small word-level fast tokenizer, so the real loader reads it exactly as it reads HHEM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from open_rag_eval.hhem.loader import DEFAULT_PROMPT

__all__ = ["BASE_DIMS", "TINY_DIMS", "TINY_WORDS", "tiny_model", "tiny_tokenizer", "write_tiny_hhem"]

_WORDS = (
    "determine if the hypothesis is true given premise ? : . , paris capital of france berlin sky blue "
    "because atmosphere scatters sunlight a an and or in on it was built 1889 tower eiffel located city "
    "river seine population million people museum louvre art famous landmark visited monuments world"
)
TINY_WORDS = tuple(_WORDS.split())


def tiny_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(["<pad>", "</s>", "<unk>", *dict.fromkeys(TINY_WORDS)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


TINY_DIMS: dict[str, Any] = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4}
BASE_DIMS: dict[str, Any] = {"d_model": 768, "d_kv": 64, "d_ff": 2048, "num_layers": 12, "num_heads": 12}  # flan-t5-base


def tiny_model(vocab_size: int, seed: int = 0, dims: dict[str, Any] | None = None) -> Any:
    """A randomly initialised T5ForTokenClassification with flan-t5's layout (gated-gelu), in eval mode."""
    import torch
    from transformers import T5Config, T5ForTokenClassification

    torch.manual_seed(seed)
    settings: dict[str, Any] = {
        "vocab_size": vocab_size, **(dims or TINY_DIMS), "feed_forward_proj": "gated-gelu", "dropout_rate": 0.0,
        "classifier_dropout": 0.0, "num_labels": 2, "is_encoder_decoder": False, "use_cache": False,
    }
    config = T5Config(**settings)
    model = T5ForTokenClassification(config)
    with torch.no_grad():  # spread the random logits so the two classes differ visibly
        model.classifier.weight.normal_(0.0, 0.15)
    return model.eval()


def write_tiny_hhem(directory: str | Path, seed: int = 0, dims: dict[str, Any] | None = None) -> Path:
    """Save a tiny HHEM-layout checkpoint and tokenizer into ``directory``; returns the directory.

    ``dims`` = T5 dimensions (default ``TINY_DIMS``; ``BASE_DIMS`` gives HHEM's compute with random weights).
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer), seed, dims)
    state = {
        f"t5.{key}": value.detach().clone().contiguous()
        for key, value in model.state_dict().items()
        if key != "transformer.encoder.embed_tokens.weight"
    }
    save_file(state, str(directory / "model.safetensors"))
    config = {"architectures": ["HHEMv2ForSequenceClassification"], "model_type": "HHEMv2Config",
              "foundation": "google/flan-t5-base", "prompt": DEFAULT_PROMPT}
    (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tokenizer.save_pretrained(str(directory))
    return directory
