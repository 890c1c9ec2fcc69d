"""Run what upstream runs: the zoo's sources named as PyTorch's dynamo benchmark suites name their models, so that an
upstream expected-accuracy CSV (torch-xpu-ops' `.github/ci_expected_accuracy/*.csv`, imported with
`bringup expect import`) gates these very cases, and a team reads bringup's verdict beside its upstream dashboard's,
row by row (bringup/expect/upstream.py).

    --source dynamo:huggingface   the huggingface suite's models (dynamo_suites.yaml: its list and EXTRA_MODELS,
                                  sorted, less `skip: all`), each case named as upstream names it
    --source dynamo:timm          the timm suite's models
    --source hf-class:NAME[,...]  transformers classes (or the suite's own names: `AllenaiLongformerBase`)
    --source csv:FILE.csv         every row of an upstream expected-accuracy CSV (its first column; `#` rows skipped):
                                  what that dashboard judged, whichever list it was made from

A name resolves to a case (`resolve`): one of the suite's EXTRA_MODELS names to the class upstream builds for it
(`hf-class`, named as upstream names it); a Hub id to the hub-top catalogue's copy of its config (`hub-top`), else
to the Hub cache (`hub`: resolved in the worker, a config failure when it is not there offline); a class name
(capitalised) to that transformers class built tiny (`hf-class`, bringup/models/hf_class.py); anything else to the
timm model of that name (`timm`). A class a transformers release lacks is a config failure of its own case, counted
apart, never a crash; a name `hf-class:` cannot resolve is one line, exit 2.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from bringup.errors import BadInput
from bringup.hub import build, refs
from bringup.models import hf_class
from bringup.models.hf_class import task_of
from bringup.zoo.cases import Entry
from bringup.zoo.timm_models import require

PREFIXES = ("dynamo:", "hf-class:", "csv:")
DATA = "dynamo_suites.yaml"
SUITES = ("huggingface", "timm")
_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*(For[A-Z][A-Za-z0-9]*|LMHeadModel|Model)")


@dataclass(frozen=True)
class Suite:
    """One dynamo benchmark suite as shipped (dynamo_suites.yaml)."""

    name: str
    models: tuple[str, ...]
    skip: frozenset[str]
    extra: dict[str, str]  # EXTRA_MODELS: upstream name -> the transformers class built for it

    def names(self) -> list[str]:
        """What the suite runs: its list and its EXTRA_MODELS' names, sorted, less those it skips everywhere."""
        return sorted((set(self.models) | set(self.extra)) - self.skip)


def suites() -> dict[str, Suite]:

    data = yaml.safe_load(resources.files("bringup.zoo").joinpath(DATA).read_text())
    return {
        name: Suite(
            name,
            tuple(data[name]["models"]),
            frozenset(data[name].get("skip") or ()),
            {k: str(v["class"]) for k, v in (data[name].get("extra") or {}).items()},
        )
        for name in SUITES
    }


def handles(source: str) -> bool:
    return source.startswith(PREFIXES)


def entries(source: str) -> list[Entry]:
    """The entries of a `dynamo:`, `hf-class:` or `csv:` source; bad input is BadInput (one line, exit 2)."""
    kind, _, rest = source.partition(":")
    if kind == "dynamo":
        suite = suites().get(rest)
        if suite is None:
            raise BadInput(f"--source {source}: unknown suite {rest!r}; use dynamo:huggingface or dynamo:timm")
        if rest == "timm":
            require()
        return [resolve(n) for n in suite.names()]
    if kind == "hf-class":
        names = [n.strip() for n in rest.split(",") if n.strip()]
        if not names:
            raise BadInput(f"--source {source}: name a class, e.g. hf-class:AlbertForMaskedLM")
        return [_class_entry(n) for n in dict.fromkeys(names)]
    return [resolve(n) for n in csv_names(rest)]


def resolve(name: str) -> Entry:
    """The zoo entry of an upstream name (the module docstring's order); the case is named `name`."""

    extra = suites()["huggingface"].extra
    if name in extra:
        return Entry("hf-class", extra[name], task_of(extra[name]), label=name)
    if "/" in name:
        config = next((e["config"] for e in refs.catalogue() if e["id"] == name), None)
        if config is not None:
            return Entry("hub-top", name, build.task_of(config)[0])
        return Entry("hub", name)
    if name[:1].isupper():
        return Entry("hf-class", name, task_of(name))
    return Entry("timm", name)


def _class_entry(name: str) -> Entry:
    """hf-class:NAME: a transformers class of this release or a name of the huggingface suite; else one line."""

    hf = suites()["huggingface"]
    known = {*hf.models, *hf.extra}
    if name in known or (_CLASS.fullmatch(name) and hf_class.has_class(name)):
        return resolve(name)
    import transformers  # lazy: planning imports no transformers

    classes = [n for n in hf_class.exported_names() if _CLASS.fullmatch(n)]
    close = difflib.get_close_matches(name, sorted(classes), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise BadInput(f"--source hf-class:{name}: transformers {transformers.__version__} has no class {name}{hint}")


def csv_names(path: str) -> list[str]:
    """The model names of an expected-accuracy CSV: its first column after a `name` header, `#` rows skipped."""
    p = Path(path)
    where = f"--source csv:{path}"
    if "torchbench" in p.name:
        raise BadInput(f"{where}: torchbench's models are not built by the zoo (its huggingface and timm suites are)")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{where}: cannot read it ({type(e).__name__}: {e})") from None
    rows = [r for r in csv.reader(io.StringIO(text)) if r and r[0].strip()]
    if not rows or rows[0][0].strip() != "name":
        raise BadInput(f"{where}:1: not an expected-accuracy CSV (the header must start with 'name')")
    names = [r[0].strip() for r in rows[1:] if not r[0].lstrip().startswith("#")]
    if not names:
        raise BadInput(f"{where}: no model rows")
    return list(dict.fromkeys(names))
