"""Text batches like a training job's (bringup/models/batches.py): ids that repeat, padded rows with their mask,
packed documents with restarting positions, and transformers' own packed-sequence path behind them."""

from __future__ import annotations

import torch

import bringup.models  # noqa: F401  (torchvision shim before transformers)
from bringup.models import batches as bt
from bringup.models import tiny as mz
from bringup.zoo.build import shapes_of


def _spec(**kw: object) -> bt.TokenSpec:
    base = {
        "allowed": torch.arange(3, 256),
        "pad_id": 0,
        "bos_id": 1,
        "eos_id": 2,
        "takes_mask": True,
        "takes_positions": True,
        "seed": 0,
    }
    return bt.TokenSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_ids_repeat_as_text_does_and_never_hit_a_special_id() -> None:
    step = bt.step_batches(_spec(), 2, 32, seed=0, pack=True, alternate=False)(0)
    pad, pk = step[bt.MICRO]
    ids = torch.cat([pad["input_ids"][pad["attention_mask"].bool()], pk["input_ids"].flatten()])
    counts = torch.bincount(ids)
    assert int(counts[3:].max()) >= 5  # the most frequent body id repeats many times within one step
    body = pk["input_ids"][pk["labels"] != bt.IGNORE]
    assert not bool((body == 0).any())  # no pad inside a document
    assert int((ids == 1).sum()) == int((pk["position_ids"] == 0).sum()) + 2  # bos opens every document


def test_padded_rows_are_masked_labelled_and_positioned_like_generate() -> None:
    pad = bt.padded(_spec(), 3, 32, torch.Generator().manual_seed(0))
    mask = pad["attention_mask"]
    assert mask[0, 0] == 0 and mask[0, -1] == 1  # left-padded
    assert mask[1, 0] == 1 and mask[1, -1] == 0  # right-padded
    assert bool(mask[2].all())  # full
    assert bool((pad["labels"][mask == 0] == bt.IGNORE).all()) and bool((pad["input_ids"][mask == 0] == 0).all())
    pos = pad["position_ids"]
    first = int(mask[0].argmax())
    assert pos[0, first] == 0 and pos[0, -1] == 32 - first - 1 and bool((pos[0, :first] == 1).all())
    no_mask = bt.padded(_spec(takes_mask=False), 2, 32, torch.Generator().manual_seed(0))
    assert "attention_mask" not in no_mask and bool((no_mask["labels"] != bt.IGNORE).all())  # no mask: full rows
    right_only = bt.padded(_spec(), 2, 32, torch.Generator().manual_seed(0), left=False)
    assert bool(right_only["attention_mask"][:, 0].all())


def test_packed_rows_restart_positions_and_ignore_each_documents_first_token() -> None:
    pk = bt.packed(_spec(), 2, 32, torch.Generator().manual_seed(0))
    pos, labels = pk["position_ids"], pk["labels"]
    assert "attention_mask" not in pk
    assert [int((p == 0).sum()) for p in pos] == [2, 3]  # 2, then 3 documents
    assert bool((labels[pos == 0] == bt.IGNORE).all()) and int((labels == bt.IGNORE).sum()) == 5
    assert bool((pk["input_ids"][pos == 0] == 1).all())  # bos at each start
    ends = torch.cat([pos[:, 1:] == 0, torch.ones(2, 1, dtype=torch.bool)], dim=1)
    assert bool((pk["input_ids"][ends] == 2).all())  # eos closes each packed document
    assert all(n >= bt.MIN_DOC for n in bt._cuts(32, 3, torch.Generator().manual_seed(1)))


def test_transformers_packed_path_keeps_documents_apart() -> None:
    """A packed row's second document computes exactly what it computes alone (block-diagonal causal mask built
    from the restarting position_ids): the batch exercises the model's own packed-sequence path."""
    b = mz.build_hf("llama")
    pk = b.make_batch(0)[bt.MICRO][1]
    model = b.model.to(torch.float64).eval()
    row, pos = pk["input_ids"][:1], pk["position_ids"][:1]
    start = int((pos[0, 1:] == 0).nonzero()[0]) + 1
    with torch.no_grad():
        packed = model(input_ids=row, position_ids=pos).logits[0, start:]
        alone = model(input_ids=row[:, start:], position_ids=pos[:, start:]).logits[0]
        joined = model(input_ids=row).logits[0, start:]  # no positions: one long document
    assert torch.allclose(packed, alone, rtol=0, atol=1e-10)
    assert (joined - alone).abs().max() > 1e-3


def test_a_step_of_microbatches_trains_on_their_mean_and_the_case_says_what_ran() -> None:
    b = mz.build_hf("gpt2")
    step = b.make_batch(0)
    out = b.forward(b.model, step)
    loss = b.loss(out, step)
    parts = [b.model(**m).loss for m in step[bt.MICRO]]
    assert torch.allclose(loss, torch.stack(parts).mean())
    assert b.logits(out).shape[0] == 6  # both microbatches' rows
    fed = bt.describe(step, "text")
    assert fed["ids"] == "zipf" and fed["max_repeat"] >= 5 and fed["seq"] == 37 and fed["rows"] == [3, 3]
    assert fed["layouts"][0].startswith("padded: 3 rows (1 left-padded, 1 right-padded)")
    assert fed["layouts"][1].startswith("packed: 3 rows, 7 documents, position_ids restarting")


def test_uniform_inputs_keep_the_old_layout() -> None:
    b = mz.build_hf("llama", bs=mz.BatchSpec(batch=2, seq=16, inputs="uniform"))
    step = b.make_batch(0)
    assert set(step) == {"input_ids", "labels"} and tuple(step["input_ids"].shape) == (2, 16)
    assert bt.describe(step, "uniform")["layouts"] == ["full: 2 rows"]


def test_full_size_alternates_the_layouts_step_by_step() -> None:
    b = mz.build_hf("llama", bs=mz.BatchSpec(alternate=True))
    assert "attention_mask" in b.make_batch(0) and "attention_mask" not in b.make_batch(1)
    assert bt.MICRO not in b.make_batch(0)


def test_no_loss_term_reads_a_fully_masked_row() -> None:
    """A causal LM predicts label t + 1 from position t: in a left-padded row the first real token would be
    predicted from the last pad's output, a query whose every key is masked (what the kernel is free to fill). It
    is labelled -100, as a packed document's first token is; a masked LM's labels are not shifted and keep it."""
    g = torch.Generator().manual_seed(0)
    pad = bt.padded(_spec(), 3, 37, g, shifted=True)
    mask, labels = pad["attention_mask"], pad["labels"]
    first = int(mask[0].argmax())
    assert first > 0 and labels[0, first] == bt.IGNORE and labels[0, first + 1] != bt.IGNORE
    assert labels[1, 0] != bt.IGNORE and labels[2, 0] != bt.IGNORE  # right-padded and full rows start at 0
    unshifted = bt.padded(_spec(), 3, 37, torch.Generator().manual_seed(0))
    assert unshifted["labels"][0, first] != bt.IGNORE
    assert torch.equal(pad[bt.POSITIONS], mask.bool())  # the positions a job defines: the real tokens


def test_the_outputs_a_job_defines_follow_the_tokens_of_each_microbatch() -> None:
    b = mz.build_hf("llama")
    step = b.make_batch(0)
    logits = b.logits(b.forward(b.model, step))
    pos = bt.output_positions(step, logits)
    assert pos is not None and tuple(pos.shape) == tuple(logits.shape[:2])
    pad, pk = step[bt.MICRO]
    assert int((~pos).sum()) == int((pad["attention_mask"] == 0).sum())  # the pads, and only them
    assert bt.output_positions(step, logits[:, :, 0].T) is None  # not laid out along the tokens: no positions
    cls = mz.build_hf("llama", "sequence-classification")  # a classifier's logits follow the rows
    assert all(bt.POSITIONS not in m for m in bt.micro(cls.make_batch(0)) or [cls.make_batch(0)])


def test_a_tiny_model_has_the_shapes_real_jobs_have() -> None:
    """Widths that no block divides: vocab, hidden, head dim, intermediate; 3 query heads per kv head (a GQA type:
    llama's default config is MHA and stays MHA)."""
    b = mz.build_hf("mistral")
    from bringup.zoo.args import TINY_BATCH, TINY_SEQ

    assert (mz.BatchSpec().batch, mz.BatchSpec().seq) == (TINY_BATCH, TINY_SEQ)  # one default, written twice
    w = shapes_of(b.model)
    assert w == {"vocab": 251, "hidden": 72, "heads": 6, "kv_heads": 2, "head_dim": 12, "ffn": 136}
    stablelm = mz.build_hf("stablelm")  # partial rotary: 12 x 0.25 = 3 rotary dims would not pair; 4 do
    assert stablelm.model.config.rope_parameters["partial_rotary_factor"] * 12 == 4
