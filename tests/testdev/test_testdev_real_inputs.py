"""Faults only real inputs expose (issue 43), at op level on testdev against cpu, and the fused attention kernel
that one of them lives in. Each fault is a genuine wrong result where its input exercises it and the exact op
everywhere else:

    fault                          exercised by                         elsewhere
    -----------------------------  -----------------------------------  ------------------------------------
    lastwrite:OP                   a repeated index (token id)          bit-identical (ids that never repeat)
    sdpa_mask_as_causal            an explicit attn_mask                bit-identical (is_causal, no mask)
    count_ignored:nll_loss         ignore_index targets, mean reduction bit-identical (no ignored target)
    blockscan:cumsum=N             a carry into a block (packed rows'   bit-identical (unpacked rows: zeros)
                                   document ids)

The last test runs a tiny llama step on testdev for each: the old layout (uniform ids that never repeat, full
rows, no mask, one document per row) against a padded and a packed batch like the zoo's new ones. Every test
runs in a subprocess (importing testdev makes PrivateUse1 the accelerator of that process).
"""

from __future__ import annotations

import pytest

from tests.testdev.conftest import run_py


def test_real_input_fault_specs_round_trip_and_bad_ones_fail_in_one_line(testdev_built: None) -> None:
    out = run_py("""
        import json, bringup.testdev as td
        spec = ("lastwrite:embedding_dense_backward,lastwrite:index_put_,lastwrite:aten::index_add,"
                "lastwrite:scatter_add_,count_ignored:nll_loss,count_ignored:nll_loss2d,blockscan:cumsum=8,"
                "sdpa_mask_as_causal,drop_scale")
        f = td.parse_faults(spec)
        td.set_faults(spec)
        res = {"spec": f.spec(), "round_trip": td.parse_faults(f.spec()) == f, "set": td.faults() == f, "on": bool(f),
               "flag_only": td.parse_faults("sdpa_mask_as_causal").spec()}
        td.set_faults(None)
        res["off"] = td.faults().spec()
        bad = {}
        for s in ("lastwrite:gelu", "lastwrite:embedding_dense_backward=2", "count_ignored:mse_loss",
                  "blockscan:cumsum", "blockscan:cumsum=0", "blockscan:cumsum=1.5", "blockscan:sum=4",
                  "sdpa_mask_as_causal=1"):
            try:
                td.parse_faults(s)
                bad[s] = ""
            except ValueError as e:
                bad[s] = str(e)
        res["bad"] = bad
        print(json.dumps(res))
    """)
    assert out["spec"] == (
        "lastwrite:aten::_index_put_impl_,lastwrite:aten::embedding_dense_backward,lastwrite:aten::index_add,"
        "lastwrite:aten::scatter_add,count_ignored:aten::nll_loss,count_ignored:aten::nll_loss2d,"
        "blockscan:aten::cumsum=8,drop_scale,sdpa_mask_as_causal"
    )
    assert out["round_trip"] and out["set"] and out["on"] and out["off"] == ""
    assert out["flag_only"] == "sdpa_mask_as_causal"
    for spec, msg in out["bad"].items():
        assert msg and "\n" not in msg and repr(spec) in msg and "lastwrite:OP" in msg, (spec, msg)


def test_lastwrite_loses_repeated_writes_and_changes_nothing_without_repeats(testdev_built: None) -> None:
    """Each index-accumulating op keeps only the last write of a repeated index (self[i] + v_last), on testdev
    against cpu; with no repeated index the result is bit-identical to the clean device's."""
    out = run_py("""
        import json, torch, torch.nn.functional as F, bringup.testdev as td
        W = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))

        def embedding(ids, **kw):
            def run(dev):
                w = W.to(dev, copy=True).requires_grad_()
                g = torch.arange(ids.numel() * 4, dtype=torch.float32).view(*ids.shape, 4) + 1
                F.embedding(ids.to(dev), w, **kw).backward(g.to(dev))
                return w.grad.cpu()
            return run

        def index_put(idx):
            def run(dev):
                x = torch.ones(5, 3, device=dev)
                v = torch.arange(idx.numel() * 3, dtype=torch.float32).view(-1, 3) + 1
                return x.index_put_((idx.to(dev),), v.to(dev), accumulate=True).cpu()
            return run

        def gather_rows(idx):  # x[idx]'s backward accumulates through index_put_(accumulate=True)
            def run(dev):
                x = torch.zeros(5, 3, device=dev, requires_grad=True)
                x[idx.to(dev)].mul(torch.arange(1.0, 4.0).to(dev)).sum().backward()
                return x.grad.cpu()
            return run

        def index_add(idx):
            def run(dev):
                src = torch.arange(idx.numel() * 3, dtype=torch.float32).view(-1, 3) + 1
                return torch.ones(5, 3, device=dev).index_add(0, idx.to(dev), src.to(dev), alpha=2).cpu()
            return run

        def scatter_add(idx):
            def run(dev):
                src = torch.arange(12, dtype=torch.float32).view(3, 4) + 1
                return torch.ones(3, 4, device=dev).scatter_add(1, idx.to(dev), src.to(dev)).cpu()
            return run

        T = torch.tensor
        cases = {  # name: (fault, repeated, unique)
            "embedding": ("lastwrite:embedding_dense_backward", embedding(T([[1, 2, 1, 3], [1, 5, 6, 2]])),
                          embedding(T([[1, 2, 7, 3], [0, 5, 6, 4]]))),
            "embedding_pad_freq": ("lastwrite:embedding_dense_backward",
                                   embedding(T([[1, 2, 1, 3], [1, 5, 6, 2]]), padding_idx=1, scale_grad_by_freq=True),
                                   embedding(T([[1, 2, 7, 3], [0, 5, 6, 4]]), padding_idx=1, scale_grad_by_freq=True)),
            "index_put": ("lastwrite:index_put", index_put(T([0, 2, 0, 4])), index_put(T([0, 2, 1, 4]))),
            "gather_rows": ("lastwrite:index_put", gather_rows(T([1, 3, 1])), gather_rows(T([1, 3, 0]))),
            "index_add": ("lastwrite:index_add", index_add(T([0, 2, 0, 4])), index_add(T([0, 2, 1, 4]))),
            "scatter_add": ("lastwrite:scatter_add", scatter_add(T([[0, 1, 0], [2, 2, 3], [0, 1, 2]])),
                            scatter_add(T([[0, 1, 3], [2, 1, 3], [0, 1, 2]]))),
        }
        res = {}
        for name, (fault, repeated, unique) in cases.items():
            clean_rep, clean_uni = repeated("testdev"), unique("testdev")
            td.set_faults(fault)
            bad_rep, bad_uni = repeated("testdev"), unique("testdev")
            td.set_faults(None)
            cpu_same = torch.equal(clean_rep, repeated("cpu")) and torch.equal(clean_uni, unique("cpu"))
            res[name] = {"clean_is_cpu": cpu_same, "repeated": bad_rep.tolist(), "clean": clean_rep.tolist(),
                         "unique_same": torch.equal(bad_uni, clean_uni)}
        print(json.dumps(res))
    """)
    for name, r in out.items():
        assert r["clean_is_cpu"] and r["unique_same"], (name, r)
        assert r["repeated"] != r["clean"], name
    emb, rows = out["embedding"], [[4 * i + j + 1.0 for j in range(4)] for i in range(8)]
    # id 1 at positions 0, 2, 4: the last one's row survives (the clean row sums all three); id 2 at 1 and 7
    assert emb["repeated"][1] == rows[4] and emb["clean"][1] == [
        a + b + c for a, b, c in zip(rows[0], rows[2], rows[4], strict=True)
    ]
    assert emb["repeated"][2] == rows[7] and emb["repeated"][3] == emb["clean"][3] == rows[3]
    pf = out["embedding_pad_freq"]
    assert pf["repeated"][1] == pf["clean"][1] == [0.0] * 4  # padding_idx: no gradient either way
    assert pf["repeated"][2] == [x / 2 for x in rows[7]]  # scale_grad_by_freq still divides by the id's count (2)
    assert out["index_put"]["repeated"][0] == [1 + 7.0, 1 + 8.0, 1 + 9.0]  # self + v_last (clean: self + v0 + v2)
    assert out["gather_rows"]["repeated"][1] == [1.0, 2.0, 3.0] and out["gather_rows"]["clean"][1] == [2.0, 4.0, 6.0]
    assert out["index_add"]["repeated"][0] == [1 + 2 * 7.0, 1 + 2 * 8.0, 1 + 2 * 9.0]
    assert out["scatter_add"]["repeated"][0][0] == 1 + 3.0 and out["scatter_add"]["clean"][0][0] == 1 + 1 + 3.0


def test_fused_attention_matches_cpu_and_takes_what_it_can(testdev_built: None) -> None:
    """SDPA on testdev runs its fused kernel (overrideable; no op of it on the CPU fallback) for fp32 / bf16 / fp16,
    forward and backward, with and without a mask, causal, with grouped-query heads, and under torch.compile
    (aot_eager): equal to cpu (whose SDPA runs the same flash kernel). float64, dropout, sdpa_kernel(MATH) and a
    mask that needs a gradient take the math path, as before."""
    out = run_py("""
        import json, torch, torch.nn.functional as F, bringup.testdev as td
        from torch.nn.attention import SDPBackend, sdpa_kernel
        g = torch.Generator().manual_seed(0)
        B, H, S, D = 2, 4, 8, 16
        mask = torch.ones(B, 1, S, S, dtype=torch.bool).tril()
        mask[0, :, :, :3] = False  # a left-padded row: its first three queries see nothing
        additive = torch.zeros(B, 1, S, S).masked_fill(~mask, float("-inf"))

        def run(dev, dt, kv_heads, kw, fn=F.scaled_dot_product_attention):
            q = torch.randn(B, H, S, D, generator=g.manual_seed(1)).to(dev, dt).requires_grad_()
            k, v = (torch.randn(B, kv_heads, S, D, generator=g.manual_seed(s)).to(dev, dt).requires_grad_()
                    for s in (2, 3))
            kw = {n: x.to(dev) if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
            if "attn_mask" in kw and kw["attn_mask"].is_floating_point():
                kw["attn_mask"] = kw["attn_mask"].to(dt)
            o = fn(q, k, v, enable_gqa=kv_heads != H, **kw)
            o.backward(torch.randn(o.shape, generator=g.manual_seed(4)).to(dev, dt))
            return [t.detach().cpu().float() for t in (o, q.grad, k.grad, v.grad)]

        res = {"fused": {}, "math": {}}
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for kv in (H, 2):
                for label, kw in (("causal", {"is_causal": True}), ("bool_mask", {"attn_mask": mask}),
                                  ("additive_mask", {"attn_mask": additive}), ("none", {})):
                    td.reset_fallback_counts()
                    dev_out = run("testdev", dt, kv, kw)
                    fb = td.fallback_counts()
                    fb.pop("aten::where.self", None)  # the bool mask's conversion (SDPA's own, before the kernel)
                    cpu_out = run("cpu", dt, kv, kw)
                    err = max((a - b).abs().max().item() for a, b in zip(dev_out, cpu_out))
                    res["fused"][f"{dt}/{kv}/{label}"] = {"err": err, "fallbacks": fb}
        compiled = torch.compile(F.scaled_dot_product_attention, backend="aot_eager")
        c = run("testdev", torch.float32, 2, {"attn_mask": mask}, compiled)
        e = run("testdev", torch.float32, 2, {"attn_mask": mask})
        res["compiled_equal"] = all(torch.equal(a, b) for a, b in zip(c, e))
        x = torch.randn(B, H, S, D, device="testdev")
        choice = lambda *a, **kw: torch._fused_sdp_choice(*a, **kw)
        res["choice"] = {"fp32": choice(x, x, x), "fp64": choice(x.double(), x.double(), x.double()),
                         "dropout": choice(x, x, x, dropout_p=0.1), "3d": choice(x[0], x[0], x[0]),
                         "mask_grad": choice(x, x, x, additive.to("testdev").requires_grad_())}
        with sdpa_kernel([SDPBackend.MATH]):
            res["choice"]["forced_math"] = choice(x, x, x)
        td.reset_fallback_counts()
        F.scaled_dot_product_attention(x.double(), x.double(), x.double(), is_causal=True)
        res["fp64_math_fallbacks"] = "aten::_softmax.out" in td.fallback_counts()
        try:
            torch.ops.aten._scaled_dot_product_fused_attention_overrideable(x, x, x, None, 0.1)
            res["dropout_kernel"] = ""
        except RuntimeError as err:
            res["dropout_kernel"] = str(err).splitlines()[0]
        print(json.dumps(res))
    """)
    for key, r in out["fused"].items():
        assert r["fallbacks"] == {}, (key, r)  # the whole attention ran in the fused kernel
        assert r["err"] == 0.0, (key, r)  # the same flash kernel on the same numbers
    assert out["compiled_equal"]
    # 4 = SDPBackend.overrideable (testdev's fused kernel), 0 = math
    assert out["choice"] == {"fp32": 4, "fp64": 0, "dropout": 0, "3d": 0, "mask_grad": 0, "forced_math": 0}
    assert out["fp64_math_fallbacks"]
    assert "dropout_p must be 0" in out["dropout_kernel"]


def test_sdpa_mask_as_causal_ignores_explicit_masks_and_nothing_else(testdev_built: None) -> None:
    """The fused kernel serves an explicit mask with its causal kernel: a left-padded row's real queries attend to
    its pads, a packed row's documents to each other (forward and backward); a row whose mask is the causal one
    is unchanged, and so is every call without a mask. drop_scale reaches the fused kernel (its scale)."""
    out = run_py("""
        import json, torch, torch.nn.functional as F, bringup.testdev as td
        g = torch.Generator().manual_seed(0)
        B, H, S, D = 3, 2, 12, 16
        q, k, v = (torch.randn(B, H, S, D, generator=g) for _ in range(3))
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        mask = causal.repeat(B, 1, 1, 1)
        mask[0, :, :, :4] = False  # row 0: left-padded by 4
        doc = torch.tensor([0] * 5 + [1] * 7)
        mask[1] &= doc[:, None] == doc[None, :]  # row 1: two packed documents (block-diagonal causal)
        # row 2: full, its mask is the causal one

        def run(**kw):
            xs = [t.to("testdev").requires_grad_() for t in (q, k, v)]
            o = F.scaled_dot_product_attention(*xs, **{n: x.to("testdev") if isinstance(x, torch.Tensor) else x
                                                       for n, x in kw.items()})
            o.backward(torch.ones_like(o))
            return [t.detach().cpu() for t in (o, *(x.grad for x in xs))]

        res = {}
        for fault in ("sdpa_mask_as_causal", "drop_scale"):
            clean = {"mask": run(attn_mask=mask), "causal": run(is_causal=True), "none": run()}
            td.set_faults(fault)
            bad = {"mask": run(attn_mask=mask), "causal": run(is_causal=True), "none": run()}
            td.set_faults(None)
            res[fault] = {
                name: {"rows_differ": [any(not torch.equal(a[r], b[r]) for a, b in zip(clean[name], bad[name]))
                                       for r in range(B)],
                       "grads_differ": any(not torch.equal(a, b) for a, b in zip(clean[name][1:], bad[name][1:]))}
                for name in clean
            }
        print(json.dumps(res))
    """)
    m = out["sdpa_mask_as_causal"]
    assert m["mask"]["rows_differ"] == [True, True, False]  # left pads and packed documents; the full row is causal
    assert m["mask"]["grads_differ"]  # the backward serves the mask with the causal kernel too
    assert m["causal"]["rows_differ"] == m["none"]["rows_differ"] == [False, False, False]
    d = out["drop_scale"]
    assert all(d[name]["rows_differ"] == [True, True, True] for name in ("mask", "causal", "none")), d


def test_count_ignored_divides_by_every_target(testdev_built: None) -> None:
    """cross_entropy on testdev is log_softmax + nll_loss_forward / nll_loss_backward on the CPU fallback; with the
    fault the mean divides by all targets (ignore_index ones too), and the gradient by the same count (the
    backward divides by the total_weight the forward returned). No ignored target, or reduction='sum': unchanged."""
    out = run_py("""
        import json, torch, torch.nn.functional as F, bringup.testdev as td
        x = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
        ignored = torch.tensor([1, -100, 2, 3, -100, 4, 0, -100])  # 5 of 8 count
        none = torch.tensor([1, 0, 2, 3, 1, 4, 0, 2])
        img = torch.randn(2, 5, 3, 3, generator=torch.Generator().manual_seed(1))
        img_t = torch.randint(0, 5, (2, 3, 3), generator=torch.Generator().manual_seed(2))
        img_t[0, 0] = -100  # 3 of 18 ignored

        def run(inp, t, reduction="mean", dev="testdev"):
            xs = inp.detach().to(dev, copy=True).requires_grad_()
            loss = F.cross_entropy(xs, t.to(dev), reduction=reduction)
            loss.backward()
            return loss.detach().cpu(), xs.grad.cpu()

        td.reset_fallback_counts()
        run(x, ignored)
        res = {"ops": sorted(td.fallback_counts())}
        clean = {"ign": run(x, ignored), "none": run(x, none), "sum": run(x, ignored, "sum"), "2d": run(img, img_t)}
        res["clean_is_cpu"] = all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for k, (inp, t) in
                                  {"ign": (x, ignored), "2d": (img, img_t)}.items()
                                  for a, b in zip(clean[k], run(inp, t, dev="cpu")))
        td.set_faults("count_ignored:nll_loss,count_ignored:nll_loss2d")
        bad = {"ign": run(x, ignored), "none": run(x, none), "sum": run(x, ignored, "sum"), "2d": run(img, img_t)}
        td.set_faults(None)
        for k in ("ign", "2d"):
            (cl, cg), (bl, bg) = clean[k], bad[k]
            nz = cg != 0
            res[k] = {"loss_ratio": (bl / cl).item(), "grad_ratio": (bg[nz] / cg[nz]).tolist(),
                      "zero_grads_stay": torch.equal(bg[~nz], cg[~nz])}
        res["none_same"] = all(torch.equal(a, b) for a, b in zip(clean["none"], bad["none"]))
        res["sum_same"] = all(torch.equal(a, b) for a, b in zip(clean["sum"], bad["sum"]))
        print(json.dumps(res))
    """)
    assert out["ops"] == [
        "aten::_log_softmax.out",
        "aten::_log_softmax_backward_data.out",
        "aten::nll_loss_backward.grad_input",
        "aten::nll_loss_forward.output",
    ]
    assert out["clean_is_cpu"]
    for key, counted in (("ign", 5 / 8), ("2d", 15 / 18)):
        r = out[key]
        assert r["loss_ratio"] == pytest.approx(counted, rel=1e-6), (key, r)
        assert r["grad_ratio"] == pytest.approx([counted] * len(r["grad_ratio"]), rel=1e-5), key
        assert r["zero_grads_stay"]
    assert out["none_same"] and out["sum_same"]


def test_blockscan_restarts_packed_document_ids_only(testdev_built: None) -> None:
    """transformers finds packed documents from position_ids on the device: (diff(position_ids) != 1).cumsum(-1).
    A scan that drops the carry between blocks of 4 numbers a packed row's documents wrongly; an unpacked row's
    flags are all 0 (every carry 0): unchanged, bit for bit, like a scan shorter than a block."""
    out = run_py("""
        import json, torch, bringup.testdev as td
        packed = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1, 2], [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6]])
        plain = torch.arange(12).repeat(2, 1)

        def documents(pos):
            p = pos.to("testdev")
            return (torch.diff(p, prepend=p[:, :1] - 1, dim=-1) != 1).cumsum(-1).cpu()

        def floats(n):
            x = torch.linspace(-1, 1, n).to("testdev")
            return x.cumsum(0).cpu(), x.clone().cumsum_(0).cpu()

        clean = {"packed": documents(packed), "plain": documents(plain), "short": floats(4), "long": floats(12)}
        td.set_faults("blockscan:cumsum=4")
        bad = {"packed": documents(packed), "plain": documents(plain), "short": floats(4), "long": floats(12)}
        td.set_faults(None)
        x = torch.linspace(-1, 1, 12)
        blocks = torch.cat([c.cumsum(0) for c in x.split(4)])
        print(json.dumps({"packed": bad["packed"].tolist(), "packed_clean": clean["packed"].tolist(),
                          "plain_same": torch.equal(bad["plain"], clean["plain"]),
                          "short_same": all(torch.equal(a, b) for a, b in zip(bad["short"], clean["short"])),
                          "long_blocks": all(torch.allclose(t, blocks) for t in bad["long"])}))
    """)
    assert out["packed_clean"] == [[0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]]
    assert out["packed"] == [[0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]]
    assert out["plain_same"] and out["short_same"] and out["long_blocks"]


def test_llama_step_real_layouts_expose_what_the_old_layout_hides(testdev_built: None) -> None:
    """A tiny llama (GQA, sdpa attention) training step on testdev, each fault on against the clean device. The
    old zoo layout (2 x 16 uniform ids that never repeat, full rows, no mask, one document per row) leaves the
    gradients and the loss of lastwrite, sdpa_mask_as_causal and blockscan bit-identical: that is why the old
    inputs were blind. A padded batch (left and right, attention_mask, position_ids = cumsum(mask) - 1, labels
    -100 on pads) and a packed one (position_ids restarting per document, no mask, -100 on each document's first
    token), both with repeated ids, change them. count_ignored was never blind for a causal LM: transformers'
    label shift pads each row's last target with -100, so the old layout's mean counts 32 targets for 30."""
    out = run_py("""
        import copy, json, torch, bringup.testdev as td
        from bringup.compat import ensure_torchvision_importable
        ensure_torchvision_importable()  # a CUDA torchvision next to a cpu torch (bringup/compat.py)
        from transformers import LlamaConfig, LlamaForCausalLM
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                          attn_implementation="sdpa", use_cache=False)  # training, as the zoo: no kv cache
        base = LlamaForCausalLM(cfg)
        S, g = 16, torch.Generator().manual_seed(1)
        old_ids = (torch.randperm(60, generator=g)[:2 * S] + 4).view(2, S)
        old = {"input_ids": old_ids, "labels": old_ids.clone()}
        ids = torch.randint(4, 12, (2, S), generator=g)  # 8 ids for 32 tokens: repeated
        mask = torch.ones(2, S, dtype=torch.long)
        mask[0, :5] = 0  # left-padded
        mask[1, -4:] = 0  # right-padded
        padded = {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask,
                  "position_ids": (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1),
                  "labels": ids.masked_fill(mask == 0, -100)}
        pos = torch.stack([torch.cat([torch.arange(n) for n in docs]) for docs in ((6, 10), (5, 5, 6))])
        ids = torch.randint(4, 12, (2, S), generator=g)
        packed = {"input_ids": ids, "position_ids": pos, "labels": ids.masked_fill(pos == 0, -100)}

        def step(batch, dev):
            model = copy.deepcopy(base).to(dev)
            out = model(**{k: v.to(dev) for k, v in batch.items()})
            out.loss.backward()
            return {"loss": out.loss.detach().cpu(), **{n: p.grad.cpu() for n, p in model.named_parameters()}}

        faults = ("lastwrite:embedding_dense_backward", "sdpa_mask_as_causal", "count_ignored:nll_loss",
                  "blockscan:cumsum=4")
        res = {}
        for name, batch in (("old", old), ("padded", padded), ("packed", packed)):
            clean, ref = step(batch, "testdev"), step(batch, "cpu")
            res[name] = {"clean_vs_cpu": max(((clean[k] - ref[k]).norm() / ref[k].norm()).item() for k in ref)}
            for fault in faults:
                td.set_faults(fault)
                bad = step(batch, "testdev")
                td.set_faults(None)
                res[name][fault] = {"changed": sorted(k for k in clean if not torch.equal(clean[k], bad[k])),
                                    "loss_ratio": (bad["loss"] / clean["loss"]).item()}
        print(json.dumps(res))
    """)
    emb, attn = "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"
    old = out["old"]
    for fault in ("lastwrite:embedding_dense_backward", "sdpa_mask_as_causal", "blockscan:cumsum=4"):
        assert old[fault]["changed"] == [], (fault, old[fault])  # bit-identical: the old layout cannot see it
    assert old["count_ignored:nll_loss"]["loss_ratio"] == pytest.approx(30 / 32, rel=1e-6)
    for name in ("padded", "packed"):
        r = out[name]
        assert r["clean_vs_cpu"] < 1e-5, (name, r["clean_vs_cpu"])
        assert emb in r["lastwrite:embedding_dense_backward"]["changed"], (name, r)
        assert r["lastwrite:embedding_dense_backward"]["loss_ratio"] == 1.0  # the backward only
        assert "loss" in r["sdpa_mask_as_causal"]["changed"] and attn in r["sdpa_mask_as_causal"]["changed"], name
        assert r["count_ignored:nll_loss"]["loss_ratio"] < 0.9, (name, r)  # 5 + 4 pads + 2 shifts, or 5 firsts + 2
    assert out["old"]["clean_vs_cpu"] < 1e-5
    assert out["padded"]["blockscan:cumsum=4"]["changed"] == []  # an attention_mask: no packed-sequence scan
    assert "loss" in out["packed"]["blockscan:cumsum=4"]["changed"]  # documents numbered wrongly: masked wrongly
