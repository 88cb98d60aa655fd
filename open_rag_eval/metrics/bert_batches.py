"""BERTScore F1 in batches fixed by the texts alone, so that every process computes the same bits.

bert-score (``bert_cos_score_idf``) embeds the distinct sentences of a call in batches after ordering them through a
``set``: sentences of equal word count come in the order of the process's string hashes (``PYTHONHASHSEED``), so
which sentences share a batch -- its padded length, hence the last bits of a float32 score -- changed from one
process to the next: two local runs, or a local run and a Ray model actor, wrote different BERTScore digits (14 of
320 pairs differed between two hash seeds on a 400-output run). Here the same computation orders equal word counts
by their text; the embedding and the greedy matching are bert-score's own functions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

__all__ = ["f1_scores"]


def f1_scores(scorer: Any, cands: Sequence[str], refs: Sequence[str], batch_size: int) -> list[float]:
    """F1 of each (candidate, reference) pair, as ``BERTScorer.score(cands, refs)`` computes it (no idf; its
    baseline rescaling when the scorer has one), with the sentences batched in an order of their texts alone."""
    import torch  # noqa: PLC0415
    from bert_score.utils import greedy_cos_idf  # noqa: PLC0415

    tokenizer = scorer._tokenizer
    idf: defaultdict[int, float] = defaultdict(lambda: 1.0)
    idf[tokenizer.sep_token_id] = 0
    idf[tokenizer.cls_token_id] = 0
    stats = _embedded(scorer, sorted(set(refs) | set(cands), key=lambda s: (-len(s.split(" ")), s)), idf, batch_size)
    device = next(scorer._model.parameters()).device
    preds = []
    with torch.no_grad():
        for start in range(0, len(refs), batch_size):
            ref = _padded([stats[s] for s in refs[start:start + batch_size]], device)
            hyp = _padded([stats[s] for s in cands[start:start + batch_size]], device)
            preds.append(torch.stack(greedy_cos_idf(*ref, *hyp, scorer.all_layers), dim=-1).cpu())
    scores = torch.cat(preds, dim=0)
    if scorer.rescale_with_baseline:
        scores = (scores - scorer.baseline_vals) / (1 - scorer.baseline_vals)
    return [float(v) for v in scores[..., 2].tolist()]


def _embedded(scorer: Any, sentences: list[str], idf: dict[int, float], batch_size: int) -> dict[str, Any]:
    """Each sentence's token embeddings and idf weights, embedded ``batch_size`` sentences at a time in order."""
    from bert_score.utils import get_bert_embedding  # noqa: PLC0415

    stats = {}
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start:start + batch_size]
        embs, masks, padded_idf = get_bert_embedding(batch, scorer._model, scorer._tokenizer, idf,
                                                     device=scorer.device, all_layers=scorer.all_layers)
        embs, masks, padded_idf = embs.cpu(), masks.cpu(), padded_idf.cpu()
        for i, sentence in enumerate(batch):
            n = int(masks[i].sum().item())
            stats[sentence] = (embs[i, :n], padded_idf[i, :n])
    return stats


def _padded(stats: list[tuple[Any, Any]], device: Any) -> tuple[Any, Any, Any]:
    """Embeddings, the mask of real tokens and idf weights, padded to the batch's longest sentence (padding 2.0,
    as bert-score pads) on the model's ``device``."""
    import torch  # noqa: PLC0415
    from torch.nn.utils.rnn import pad_sequence  # noqa: PLC0415

    embs = [e.to(device) for e, _ in stats]
    idfs = [i.to(device) for _, i in stats]
    lens = torch.tensor([e.size(0) for e in embs], dtype=torch.long)
    longest = int(lens.max())
    mask = (torch.arange(longest, dtype=torch.long).expand(len(lens), longest) < lens.unsqueeze(1)).to(device)
    return pad_sequence(embs, batch_first=True, padding_value=2.0), mask, pad_sequence(idfs, batch_first=True)
