"""Hub models by id, and the shipped `hub-top` catalogue, for the `zoo` suite (the models themselves: build.py).

- `parse_ids("org/name[@rev],...")` / list files name models by id (revision optional).
- `resolve(ref)` finds the id's config.json through huggingface_hub (`hf_hub_download`, which honours
  `HF_HUB_OFFLINE` and `HF_HUB_CACHE`); a missing or (offline) uncached id is `BadInput`: one line naming
  the id and the `hf download` command that pre-fetches only what is missing.
- `weight_files(ref)`: the snapshot's safetensors when every shard is in the cache
  (`try_to_load_from_cache`, no network), else None (seeded random init).
- `catalogue()`: `models/catalogue/hub_top.json`, the configs of widely used open models (package data).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from bringup.errors import BadInput

HUB_PREFIX = "hub:"
ID_RE = re.compile(r"[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?")
REV_RE = re.compile(r"[\w.\-/]+")


@dataclass(frozen=True)
class HubRef:
    id: str
    revision: str | None = None

    @property
    def name(self) -> str:
        return self.id if self.revision is None else f"{self.id}@{self.revision}"


def parse_ref(text: str, where: str) -> HubRef:
    """`org/name` or `org/name@revision`; anything else is BadInput naming `where`."""
    s = text.strip()
    ident, at, rev = s.partition("@")
    if not ID_RE.fullmatch(ident) or (at and not REV_RE.fullmatch(rev)) or ident.count("/") > 1:
        raise BadInput(f"{where}: {s!r} is not a Hub model id (ORG/NAME or ORG/NAME@REVISION)")
    return HubRef(ident, rev or None)


def parse_ids(spec: str) -> list[HubRef]:
    """`hub:ORG/NAME[@REV][,ORG/NAME...]` (the prefix optional here)."""
    body = spec[len(HUB_PREFIX) :] if spec.startswith(HUB_PREFIX) else spec
    parts = [p for p in body.split(",") if p.strip()]
    if not parts:
        raise BadInput(f"--source {spec}: no model id after {HUB_PREFIX!r}")
    return [parse_ref(p, f"--source {spec}") for p in parts]


def offline() -> bool:
    from huggingface_hub import constants  # lazy: slow huggingface_hub import

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().upper()
    return bool(constants.HF_HUB_OFFLINE) or env in ("1", "ON", "YES", "TRUE")


def prefetch_command(ref: HubRef, weights: bool = False) -> str:
    rev = f" --revision {ref.revision}" if ref.revision else ""
    what = " --include '*.json' --include '*.safetensors'" if weights else " config.json"
    return f"hf download {ref.id}{what}{rev}"


def resolve(ref: HubRef) -> Path:
    """The cached (or, online, downloaded) config.json of `ref`; BadInput with the pre-fetch command."""
    from huggingface_hub import hf_hub_download  # lazy: slow huggingface_hub import
    from huggingface_hub.errors import (  # lazy: slow huggingface_hub import
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(hf_hub_download(ref.id, "config.json", revision=ref.revision, local_files_only=offline()))
    except GatedRepoError as e:
        raise BadInput(
            f"hub:{ref.name}: gated on the Hub (accept its licence, log in with `hf auth login`), then "
            f"pre-fetch it: {prefetch_command(ref)}"
        ) from e
    except RepositoryNotFoundError as e:
        raise BadInput(f"hub:{ref.name}: no such model on the Hub (or private): check the id") from e
    except RevisionNotFoundError as e:
        raise BadInput(f"hub:{ref.name}: revision {ref.revision!r} not found on the Hub") from e
    except LocalEntryNotFoundError as e:
        why = "HF_HUB_OFFLINE is set" if offline() else "the Hub is unreachable"
        raise BadInput(
            f"hub:{ref.name}: config.json is not in the Hugging Face cache and {why}; pre-fetch it: "
            f"{prefetch_command(ref)}"
        ) from e
    except EntryNotFoundError as e:
        raise BadInput(f"hub:{ref.name}: the repository has no config.json (not a transformers model)") from e
    except OSError as e:
        raise BadInput(f"hub:{ref.name}: cannot read its config: {type(e).__name__}: {e}".splitlines()[0]) from e


def read_config(path: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInput(f"hub:{name}: config.json is not readable JSON: {type(e).__name__}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise BadInput(f'hub:{name}: config.json has no "model_type" (not a transformers model)')
    return data


def weight_files(ref: HubRef) -> list[str] | None:
    """Every safetensors file of the cached snapshot, or None when any is missing (no network)."""
    from huggingface_hub import try_to_load_from_cache  # lazy: slow huggingface_hub import

    def cached(fn: str) -> str | None:
        p = try_to_load_from_cache(ref.id, fn, revision=ref.revision)
        return p if isinstance(p, str) else None

    single = cached("model.safetensors")
    if single:
        return [single]
    index = cached("model.safetensors.index.json")
    if not index:
        return None
    try:
        shards = sorted(set(json.loads(Path(index).read_text())["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    paths = [cached(s) for s in shards]
    return [p for p in paths if p] if all(paths) else None


# ---- the catalogue --------------------------------------------------------------------------------
CATALOGUE = "hub_top.json"


def catalogue() -> list[dict[str, Any]]:
    """The shipped hub-top entries: {"id", "config", optional "unsure", "params_published", ...}."""
    text = resources.files("bringup.models.catalogue").joinpath(CATALOGUE).read_text()
    data = json.loads(text)
    return list(data["models"])


def catalogue_config(model_id: str) -> dict[str, Any]:
    for e in catalogue():
        if e["id"] == model_id:
            return dict(e["config"])
    raise BadInput(f"hub-top: no catalogue entry {model_id!r}")
