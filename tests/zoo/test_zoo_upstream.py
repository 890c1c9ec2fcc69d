"""Run what upstream runs (bringup/zoo/upstream.py, bringup/models/hf_class.py): the dynamo benchmark suites' models
named as upstream names them, each the transformers class its name says built tiny, so that an imported upstream
expected-accuracy CSV gates those very cases and the gate's output sets upstream's cell beside bringup's status.

fixtures/torch_xpu_ops/*.csv are intel/torch-xpu-ops' `.github/ci_expected_accuracy/rolling/
inductor_{huggingface,timm_models}_training.csv` at commit ab84f925a234f33ee70a29af59c03aefdeff68c3 (Apache-2.0),
unchanged: real dashboards' rows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import bringup.models  # noqa: F401  (torchvision shim before transformers/timm)
from bringup.errors import BadInput
from bringup.expect.file import ExpectFile
from bringup.models import hf_class
from bringup.models.tiny import ConfigError
from bringup.zoo import upstream
from bringup.zoo.cases import Entry
from tests.conftest import REPO, assert_one_line_error, load_json, run_cli
from tests.testdev.conftest import testdev_built  # noqa: F401  (the fixture)

HERE = Path(__file__).resolve().parent
ENV = {"PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")])}
FIX = HERE / "fixtures" / "torch_xpu_ops"
HF_CSV, TIMM_CSV = FIX / "inductor_huggingface_training.csv", FIX / "inductor_timm_models_training.csv"
# rows of torch-xpu-ops' CSV that PyTorch's current list no longer has (an older list's models)
OLDER_LIST = {"DebertaForMaskedLM", "DebertaForQuestionAnswering", "Speech2Text2ForCausalLM"}
CHEAP = ("--steps", "2", "--noise-seeds", "0", "--module-check", "off", "--compile-backend", "aot_eager")


def test_dynamo_huggingface_is_upstreams_list_each_the_class_its_name_says() -> None:
    suite = upstream.suites()["huggingface"]
    by = {e.name: e for e in upstream.entries("dynamo:huggingface")}
    assert sorted(by) == suite.names() and len(by) == 47
    assert by["AlbertForMaskedLM"] == Entry("hf-class", "AlbertForMaskedLM", "masked-lm")
    assert by["BartForConditionalGeneration"].task == "seq2seq-lm"  # also in the masked-LM mapping: the name decides
    assert by["BertForQuestionAnswering"].task == "question-answering"
    assert by["GPT2ForSequenceClassification"].task == "sequence-classification"
    assert by["XLNetLMHeadModel"].task == "causal-lm"
    # EXTRA_MODELS: the class upstream builds, the case named as upstream names it
    assert by["AllenaiLongformerBase"] == Entry(
        "hf-class", "LongformerForMaskedLM", "masked-lm", "AllenaiLongformerBase"
    )
    assert by["T5Small"].model == "T5ForConditionalGeneration" and by["DistillGPT2"].model == "GPT2LMHeadModel"
    # HF_LLM_MODELS: the hub-top catalogue's config; what upstream skips everywhere is not run
    assert by["Qwen/Qwen3-0.6B"] == Entry("hub-top", "Qwen/Qwen3-0.6B", "causal-lm")
    assert by["openai/whisper-tiny"].task == "speech-seq2seq"
    assert not {"GPTJForCausalLM", "Reformer", "openai/gpt-oss-20b"} & set(by)
    classes = [e.model for e in by.values() if e.source == "hf-class"]
    assert all(hf_class.has_class(c) for c in classes), [c for c in classes if not hf_class.has_class(c)]


def test_a_real_torch_xpu_ops_csv_imports_to_the_very_cases_the_zoo_runs(tmp_path: Path, bringup_inproc) -> None:
    """Every row of the dashboard's CSV is a case of that exact name (`csv:`), the import's keys are those cases'
    keys, and the current list (`dynamo:huggingface`) covers every row but an older list's three."""
    for path, n in ((HF_CSV, 50), (TIMM_CSV, 65)):
        rows = upstream.csv_names(str(path))
        entries = upstream.entries(f"csv:{path}")
        assert [e.name for e in entries] == rows and len(rows) == n
        p = bringup_inproc("expect", "import", str(path), "--out", f"{path.stem}.yaml", "--device", "xpu")
        assert p.returncode == 0, p.stderr
        f = ExpectFile.load(tmp_path / f"{path.stem}.yaml")
        assert set(f.expectations(f.select("xpu", "2.13.0"))) == {f"zoo/{e.name}" for e in entries}
    hf = {e.name for e in upstream.entries(f"csv:{HF_CSV}")}
    assert hf - {e.name for e in upstream.entries("dynamo:huggingface")} == OLDER_LIST
    timm = upstream.entries(f"csv:{TIMM_CSV}")
    assert {e.source for e in timm} == {"timm"}
    assert {e.name for e in upstream.entries("dynamo:timm")} <= {e.name for e in timm}


def test_bad_sources_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no class AlbertForMaskedLMM .did you mean AlbertForMaskedLM"):
        upstream.entries("hf-class:AlbertForMaskedLMM")
    with pytest.raises(BadInput, match="unknown suite 'torchbench'"):
        upstream.entries("dynamo:torchbench")
    with pytest.raises(BadInput, match="torchbench's models are not built"):
        upstream.entries(f"csv:{tmp_path / 'inductor_torchbench_training.csv'}")
    with pytest.raises(BadInput, match="cannot read"):
        upstream.entries(f"csv:{tmp_path / 'nope.csv'}")
    (tmp_path / "bad.csv").write_text("model,float32\nA,pass\n")
    with pytest.raises(BadInput, match="header must start with 'name'"):
        upstream.entries(f"csv:{tmp_path / 'bad.csv'}")
    assert upstream.entries("hf-class:AllenaiLongformerBase")[0].model == "LongformerForMaskedLM"
    p = run_cli(["--device", "cpu", "zoo", "--source", "hf-class:BertForMaskedLMX"], cwd=tmp_path, env=ENV)
    assert_one_line_error(p, "has no class BertForMaskedLMX (did you mean BertForMaskedLM")


@pytest.mark.parametrize("name", ["AlbertForQuestionAnswering", "T5Small", "GPT2ForSequenceClassification"])
def test_the_class_is_built_tiny_with_its_own_head_and_labels(name: str) -> None:
    from bringup.models import batches
    from bringup.zoo.run import build_model

    (e,) = upstream.entries(f"hf-class:{name}")
    built = build_model({"source": e.source, "model": e.model, "task": e.task, "inputs": "text"})
    assert type(built.model).__name__ == e.model and sum(p.numel() for p in built.model.parameters()) < 1_000_000
    batch = built.make_batch(0)
    out = built.forward(built.model, batch)
    loss = built.loss(out, batch)
    assert loss.ndim == 0 and loss.isfinite() and getattr(out, "loss", None) is not None  # the head's own loss
    loss.backward()
    if e.task == hf_class.QA:  # upstream's labels, on real tokens of each row
        for b in batches.micro(batch) or [batch]:
            mask = b["attention_mask"]
            rows = range(mask.shape[0])
            assert all(mask[i, b["start_positions"][i]] == 1 and mask[i, b["end_positions"][i]] == 1 for i in rows)
            assert bool((b["start_positions"] <= b["end_positions"]).all())
        assert built.logits(out).shape[-1] == 2  # start and end logits, compared as the case's logits


def test_a_class_this_transformers_lacks_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transformers \S+ has no class Speech2Text2ForCausalLM"):
        hf_class.build("Speech2Text2ForCausalLM")
    with pytest.raises(ConfigError, match="not a model class"):
        hf_class.build("AutoConfig")


def test_a_timm_suite_name_with_a_pretrained_tag_builds() -> None:
    from bringup.zoo.timm_models import build_timm

    built = build_timm("deit_tiny_patch16_224.fb_in1k")  # timm's tagged name, as the suite lists it
    assert type(built.model).__name__ == "VisionTransformer"


# slow (45 s on 2 loaded cores): each class of the suite built and one step trained; three heads are in the default
# run (test_the_class_is_built_tiny_with_its_own_head_and_labels)
@pytest.mark.slow
def test_every_class_of_the_huggingface_suite_builds_and_trains() -> None:
    from bringup.zoo.run import build_model

    failed = {}
    for e in upstream.entries("dynamo:huggingface"):
        if e.source != "hf-class":
            continue
        try:
            built = build_model({"source": e.source, "model": e.model, "task": e.task, "inputs": "text"})
            batch = built.make_batch(0)
            built.loss(built.forward(built.model, batch), batch).backward()
        except Exception as ex:  # collected, then asserted empty
            failed[e.name] = f"{type(ex).__name__}: {ex}"[:200]
    assert not failed, failed


def _csv(tmp_path: Path) -> Path:
    """Two upstream rows: a model upstream passes, and one whose class this transformers release lacks."""
    p = tmp_path / "inductor_huggingface_training.csv"
    p.write_text(
        "name,float32,bfloat16,float16,amp_bf16,amp_fp16\n"
        "# https://github.com/intel/torch-xpu-ops/issues/1768\n"
        "AlbertForMaskedLM,pass,pass,pass,pass,pass\n"
        "Speech2Text2ForCausalLM,pass,pass,pass,pass,pass\n"
    )
    return p


def _gated(tmp_path: Path, *device: str, rc: int, env: dict[str, str] | None = None) -> dict:
    csv = _csv(tmp_path)
    run_cli(["expect", "import", str(csv), "--out", "e.yaml"], cwd=tmp_path, check_rc=0)
    p = run_cli(
        [*device, "zoo", "--source", f"csv:{csv}", *CHEAP, "--expect", "e.yaml", "--json", "out.json"],
        cwd=tmp_path,
        env={**ENV, **(env or {})},
        timeout=900,
        check_rc=rc,
    )
    data = load_json(tmp_path / "out.json")
    assert [c["name"] for c in data["cases"]] == ["AlbertForMaskedLM", "Speech2Text2ForCausalLM"]
    absent = data["cases"][1]
    assert absent["status"] == "ref_fail" and "has no class Speech2Text2ForCausalLM" in absent["reason"]
    assert data["totals"]["config_fail"] == 1  # counted apart
    assert "upstream vs bringup (2 imported row(s), float32)" in p.stdout, p.stdout[-3000:]
    return data


def test_a_class_name_run_on_cpu_is_gated_by_the_imported_rows(tmp_path: Path) -> None:
    data = _gated(tmp_path, "--device", "cpu", rc=0)
    assert data["cases"][0]["status"] == "pass" and data["cases"][0]["source"] == "hf-class"
    rows = {r["case"]: (r["upstream"], r["status"], r["verdict"]) for r in data["expectations"]["upstream"]}
    assert rows == {
        "zoo/AlbertForMaskedLM": ("pass", "pass", "same"),
        "zoo/Speech2Text2ForCausalLM": ("pass", "ref_fail", "not judged"),
    }
    assert data["expectations"]["counts"]["new_failure"] == 0


def test_a_wrong_device_fails_the_row_upstream_passes(tmp_path: Path, testdev_built: None) -> None:  # noqa: F811
    """testdev whose embedding backward keeps only the last write of a repeated id (docs/testdev.md): the gate
    names the regression against the imported row, exits 1, and the row reads `differs`."""
    fault = {"BRINGUP_TESTDEV_FAULTS": "lastwrite:embedding_dense_backward"}
    data = _gated(tmp_path, "--import", "bringup.testdev", "--device", "testdev", rc=1, env=fault)
    assert data["cases"][0]["status"] == "fail_numeric", data["cases"][0]
    (new,) = [c for c in data["expectations"]["cases"] if c["class"] == "new_failure"]
    assert new["case"] == "zoo/AlbertForMaskedLM" and new["link"].endswith("/issues/1768")
    row = next(r for r in data["expectations"]["upstream"] if r["case"] == "zoo/AlbertForMaskedLM")
    assert (row["upstream"], row["status"], row["verdict"]) == ("pass", "fail_numeric", "differs")
