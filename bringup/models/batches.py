"""Token batches like a training job's, for the zoo's text models (docs/zoo.md "Inputs").

A verdict sees only what its inputs exercise. Uniform ids that never repeat, full rows, one document per
row and positions always 0..n-1 leave a device's data path unjudged: an embedding backward that loses the
updates of a repeated id, an attention kernel that serves an explicit mask with its causal kernel, learned
positions read at 0..n-1 whatever `position_ids` say, a blocked scan that drops its carry (transformers numbers
packed documents with a cumsum) all compute the right numbers on such a batch, and a loss that counts ignored
targets is off by one target per row only. So each step of a text model is fed what jobs feed:

- **ids by rank-frequency**, as text has them (Zipf, exponent ZIPF_EXPONENT over the ids the model may see,
  ranks mapped to ids by a permutation fixed per model seed): a batch repeats its frequent ids many times.
  Special ids (pad, bos, eos, image placeholders, ...: every id the config names) never appear in a body;
  bos opens each document and eos closes each packed one where the config names them.
- **a padded microbatch** (`attention_mask`): rows padded on the left (generation-style batches: the
  padding precedes the text, so a kernel that ignores the mask lets real tokens attend to pads) and on the
  right (training collators), and full rows; labels -100 on pads; `position_ids` = cumsum(mask) - 1 with
  pads at 1, as transformers' generate() builds them, where the model takes them.
- **a packed microbatch** (causal LMs): two or three documents per row, `position_ids` restarting at each,
  no attention_mask, the first token of each document labelled -100, as HF's DataCollatorWithFlattening
  feeds: transformers builds the block-diagonal causal mask from the restarting positions (its packed-
  sequence path); a model that takes no `position_ids` sees the documents concatenated.

A tiny zoo step runs both microbatches (the loss is their mean, one backward): every module is then called
on both, and the module check judges both calls. Other tasks get the padded batch alone; the full-size zoo,
whose every step is compared, alternates them step by step. `inputs="uniform"` keeps the old layout (uniform
ids, full rows, no mask) for comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ZIPF_EXPONENT = 1.1  # word frequencies in text fall off roughly as 1 / rank (Zipf's law); 1.1 is a common fit
INPUTS = ("text", "uniform")
MICRO = "_micro"  # a step batch made of microbatches: {"_micro": [padded, packed]}
MIN_DOC = 4  # the shortest packed document, in tokens
IGNORE = -100  # transformers' ignore_index for labels
# a (micro)batch's real tokens (bool, rows x seq), not passed to the model (keys starting with "_" are not inputs): the
# output positions a job defines where the outputs follow the tokens (hf_batches keeps it only for such tasks)
POSITIONS = "_positions"


@dataclass(frozen=True)
class TokenSpec:
    """What a text model's batches need of its config and forward signature."""

    allowed: torch.Tensor  # the ids a body may use (special ids removed)
    pad_id: int
    bos_id: int | None
    eos_id: int | None
    takes_mask: bool  # forward() has an attention_mask
    takes_positions: bool  # forward() has position_ids
    seed: int

    def ranks(self) -> torch.Tensor:
        """Rank -> id: a permutation of the allowed ids fixed per model seed (the most frequent id is not
        always the smallest)."""
        g = torch.Generator().manual_seed(self.seed * 1000 + 999)
        return self.allowed[torch.randperm(self.allowed.numel(), generator=g)]


def token_spec(cfg: Any, vocab: int, avoid: set[int], sig: set[str], seed: int) -> TokenSpec:
    """The spec of a config (its text config's special ids) and a forward signature."""
    ids = torch.tensor([i for i in range(vocab) if i not in avoid], dtype=torch.long)
    if ids.numel() == 0:
        raise ValueError(f"no token ids left in a vocabulary of {vocab}")

    def valid(name: str) -> int | None:
        v = getattr(cfg, name, None)
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        return int(v) if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < vocab else None

    bos, eos, pad = valid("bos_token_id"), valid("eos_token_id"), valid("pad_token_id")
    pad_id = pad if pad is not None else eos if eos is not None else int(ids[0])
    return TokenSpec(ids, pad_id, bos, eos, "attention_mask" in sig, "position_ids" in sig, seed)


def zipf_ids(spec: TokenSpec, n: int, g: torch.Generator) -> torch.Tensor:
    """`n` ids drawn by rank-frequency (p(rank r) ~ r^-ZIPF_EXPONENT)."""
    ranks = spec.ranks()
    p = torch.arange(1, ranks.numel() + 1, dtype=torch.float64).pow(-ZIPF_EXPONENT)
    return ranks[torch.multinomial(p, n, replacement=True, generator=g)]


def uniform_ids(spec: TokenSpec, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    return spec.allowed[torch.randint(0, spec.allowed.numel(), shape, generator=g)]


def _document(spec: TokenSpec, n: int, g: torch.Generator, close: bool) -> torch.Tensor:
    """One document of `n` tokens: bos (if the config names one), a Zipf body, eos when `close` (packed)."""
    head = [spec.bos_id] if spec.bos_id is not None and n >= 3 else []
    tail = [spec.eos_id] if close and spec.eos_id is not None and n >= 3 + len(head) else []
    body = zipf_ids(spec, n - len(head) - len(tail), g)
    return torch.cat([torch.tensor(head, dtype=torch.long), body, torch.tensor(tail, dtype=torch.long)])


def padded(
    spec: TokenSpec, rows: int, seq: int, g: torch.Generator, left: bool = True, shifted: bool = False
) -> dict[str, Any]:
    """A padded microbatch: row i is left-padded (i % 3 == 0), right-padded (1) or full (2) (`left=False`:
    right-padded or full); a pad run is a quarter to a third of the row. Without an attention_mask in
    forward(), every row is full. `shifted` (a causal LM, whose loss predicts label t + 1 from position t): a
    left-padded row's first real token is labelled -100, as a packed document's first token is: what would
    predict it is the last pad's output, a query row whose every key is masked (module doc, "What a verdict
    reads")."""
    ids = torch.full((rows, seq), spec.pad_id, dtype=torch.long)
    mask = torch.zeros(rows, seq, dtype=torch.long)
    sides = ("left", "right", "full") if left else ("right", "full")
    for i in range(rows):
        side = sides[i % len(sides)] if spec.takes_mask else "full"
        pad = 0 if side == "full" else seq // 4 + int(torch.randint(0, max(1, seq // 12) + 1, (1,), generator=g))
        pad = min(pad, seq - MIN_DOC)
        lo, hi = (pad, seq) if side == "left" else (0, seq - pad)
        ids[i, lo:hi] = _document(spec, hi - lo, g, close=False)
        mask[i, lo:hi] = 1
    out: dict[str, Any] = {"input_ids": ids}
    if spec.takes_mask:
        out["attention_mask"] = mask
    if spec.takes_positions and spec.takes_mask:
        out["position_ids"] = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    labels = ids.masked_fill(mask == 0, IGNORE)
    if shifted:
        starts = mask.argmax(-1)  # each row's first real token
        left_rows = mask[:, 0] == 0
        labels[left_rows, starts[left_rows]] = IGNORE
    out["labels"] = labels
    out[POSITIONS] = mask.bool()
    return out


def _cuts(seq: int, docs: int, g: torch.Generator) -> list[int]:
    """Lengths of `docs` documents filling `seq` tokens, each >= MIN_DOC."""
    docs = max(1, min(docs, seq // MIN_DOC))
    spare = seq - docs * MIN_DOC
    w = torch.rand(docs, generator=g, dtype=torch.float64) + 0.25
    extra = [int(x) for x in (w / w.sum() * spare).floor()]
    extra[-1] += spare - sum(extra)
    return [MIN_DOC + e for e in extra]


def packed(spec: TokenSpec, rows: int, seq: int, g: torch.Generator) -> dict[str, Any]:
    """A packed microbatch: row i holds 2 + i % 2 documents, positions restarting at each, no mask; each
    document's first token is labelled -100 (nothing predicts it across the boundary)."""
    ids = torch.empty(rows, seq, dtype=torch.long)
    pos = torch.empty(rows, seq, dtype=torch.long)
    labels = torch.empty(rows, seq, dtype=torch.long)
    for i in range(rows):
        at = 0
        for n in _cuts(seq, 2 + i % 2, g):
            ids[i, at : at + n] = _document(spec, n, g, close=True)
            pos[i, at : at + n] = torch.arange(n)
            labels[i, at : at + n] = ids[i, at : at + n]
            labels[i, at] = IGNORE
            at += n
    out: dict[str, Any] = {"input_ids": ids, "labels": labels, POSITIONS: torch.ones(rows, seq, dtype=torch.bool)}
    if spec.takes_positions:
        out["position_ids"] = pos
    return out


def to_device(batch: Any, device: torch.device) -> Any:
    """A (step) batch's tensors on `device`, microbatches included."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def output_positions(batch: dict[str, Any], out: torch.Tensor | None) -> torch.Tensor | None:
    """The positions of a step's output `out` (logits; a step of microbatches: theirs concatenated along rows) that
    the job defines, as a bool tensor of `out`'s first two dimensions: a padded row's real tokens, every token of a
    packed or full row. None when the batch names no positions (outputs that do not follow the tokens: a
    classifier's, a decoder's) or `out` is not laid out along them."""
    if out is None or out.dim() < 2:
        return None
    masks = [b.get(POSITIONS) for b in micro(batch) or [batch]]
    if not all(isinstance(m, torch.Tensor) for m in masks):
        return None
    m = torch.cat(masks)  # type: ignore[arg-type]  # every mask is a Tensor (checked above)
    return m.to(out.device) if tuple(out.shape[:2]) == tuple(m.shape) else None


def micro(batch: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The microbatches of a step batch, or None for a plain one."""
    m = batch.get(MICRO)
    return list(m) if isinstance(m, (list, tuple)) else None


def describe(batch: dict[str, Any], inputs: str) -> dict[str, Any]:
    """What a step batch exercises (recorded on the case: a pass says what was covered)."""
    parts = micro(batch) or [batch]
    real: list[torch.Tensor] = []
    layouts: list[str] = []
    for b in parts:
        ids = b.get("input_ids")
        if not isinstance(ids, torch.Tensor):
            continue
        mask = b.get("attention_mask")
        keep = mask.bool() if isinstance(mask, torch.Tensor) else torch.ones_like(ids, dtype=torch.bool)
        real.append(ids[keep])
        layouts.append(_layout(b, keep))
    if not real:
        return {}
    flat = torch.cat(real)
    counts = torch.bincount(flat - flat.min()) if flat.numel() else torch.zeros(1)
    return {
        "inputs": inputs,
        "ids": "zipf" if inputs == "text" else "uniform",
        "layouts": layouts,
        "tokens": int(flat.numel()),
        "distinct_ids": int((counts > 0).sum()),
        "max_repeat": int(counts.max()),
        "seq": int(parts[0]["input_ids"].shape[-1]),
        "rows": [int(b["input_ids"].shape[0]) for b in parts if isinstance(b.get("input_ids"), torch.Tensor)],
    }


def _layout(b: dict[str, Any], keep: torch.Tensor) -> str:
    rows = int(keep.shape[0])
    if "attention_mask" in b:
        left = int((~keep[:, 0]).sum())
        right = int((~keep[:, -1]).sum())
        return f"padded: {rows} rows ({left} left-padded, {right} right-padded), attention_mask"
    pos = b.get("position_ids")
    labels = b.get("labels")
    if isinstance(pos, torch.Tensor) and bool((pos[:, 1:] == 0).any()):
        docs = int((pos == 0).sum())
        return f"packed: {rows} rows, {docs} documents, position_ids restarting"
    if isinstance(labels, torch.Tensor) and bool((labels[:, 1:] == IGNORE).any()):
        return f"packed: {rows} rows, documents concatenated (the model takes no position_ids)"
    return f"full: {rows} rows"


def step_batches(
    spec: TokenSpec, rows: int, seq: int, seed: int, pack: bool, alternate: bool, left: bool = True
) -> Callable[[int], dict[str, Any]]:
    """step -> the text part of a step's batch: a padded microbatch and (with `pack`) a packed one, both in
    one step (`{"_micro": [...]}`), or with `alternate` one of them per step (even: padded, odd: packed)."""

    def make(step: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(seed * 1000 + step + 1)
        pad = padded(spec, rows, seq, g, left, shifted=pack)  # packed microbatches are a causal LM's
        if not pack:
            return pad
        pk = packed(spec, rows, seq, g)
        if alternate:
            return pad if step % 2 == 0 else pk
        return {MICRO: [pad, pk]}

    return make
