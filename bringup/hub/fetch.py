"""Discovery and the config-only fetch, for Hub sweeps (`zoo --source hub-search:QUERY | hub-list:FILE`).

Discovery: `hub-search:[TEXT][,library=L][,task=T][,author=A][,sort=downloads|likes]` is huggingface_hub's
`list_models(search=TEXT, filter=L (default transformers), pipeline_tag=T, author=A, sort=..., limit=--limit,
expand=[downloads, likes, gated, private, sha, pipeline_tag, library_name])`; `hub-list:FILE` reads ids, one a
line: `ORG/NAME[@REVISION] [downloads=N] [likes=N]` (`#` comments).

The fetch: `config.json` of every id (no weights), through `hf_hub_download` (the Hugging Face cache, honouring
`HF_ENDPOINT`, `HF_HUB_CACHE` and `HF_HUB_OFFLINE`), pinned to the commit the listing returned, concurrently
(`workers` threads), under a rate limit (`Limits`), with retries and exponential backoff for transient errors
(5xx, 429, timeouts, connection errors; huggingface_hub retries inside each call too). Every outcome is
committed to the Hub index (hub/index.py) as it arrives: an interrupted fetch loses only the calls in
flight, and the next run fetches only what is missing (`pending`, `fetch_error`, `not_cached_offline`).

Rate limit (`Limits`): the Hub counts requests per 5-minute window in three buckets; a free user's token
gets 1,000 API calls (listings, model info) and 5,000 resolver calls (every URL with /resolve/: a config
fetch is a HEAD and a GET) per window (https://huggingface.co/docs/hub/rate-limits, "Hub Rate
limits", the Free user row; anonymous: 500 / 3,000). The default is 90% of the free user's numbers, 900 API and
4,500 resolver calls per 5 minutes, enforced as a token bucket whose burst plus refill over any 5 minutes stays
under them; `--hub-rate API,RESOLVE` sets others (a PRO token: 2,500 / 12,000). A config pinned to the commit
the listing returned costs 2 resolver calls (HEAD, GET: 7.5 configs/s at the default), one on a branch 3 (the
HEAD is redirected to the commit's URL: 5 configs/s).

Outcomes (`status` in the index; all but ok are config failures, counted by reason, never a crash):
ok | gated (the licence is not accepted for this token) | not_found_or_private (the Hub answers both alike
without a token that can see it) | missing_config (the repo has no config.json: GGUF-only, adapters, ...) |
revision_not_found | bad_config (config.json is not a JSON object) | not_cached_offline (HF_HUB_OFFLINE and
not in the cache: fetched when online) | fetch_error (transient errors after every retry: fetched again
next run).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.errors import BadInput
from bringup.hub.flags import LIST_PREFIX, SEARCH_PREFIX, Limits
from bringup.hub.index import OK, PENDING, Entry, HubIndex
from bringup.hub.refs import ID_RE, REV_RE, offline

SORTS = ("downloads", "likes")
SEARCH_KEYS = ("library", "task", "author", "sort")
EXPAND = ["downloads", "likes", "gated", "private", "sha", "pipeline_tag", "library_name"]
WINDOW_S = 300.0  # the Hub's rate-limit window

PAGE = 1000  # the Hub's listing page size (one API call per page)
CALLS_PINNED = 2  # HEAD + GET on /resolve/<commit>/config.json
CALLS_BRANCH = 3  # HEAD on /resolve/<branch>/ answers with a redirect to the commit's URL: one more call
RETRY = frozenset({PENDING, "fetch_error", "not_cached_offline"})
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


# ---- inputs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Search:
    text: str = ""
    library: str = "transformers"
    task: str | None = None
    author: str | None = None
    sort: str = "downloads"
    limit: int | None = None

    @property
    def key(self) -> str:
        """The listing's key in the index (same query, same ids)."""
        return json.dumps(
            {
                "search": self.text,
                "library": self.library,
                "task": self.task,
                "author": self.author,
                "sort": self.sort,
                "limit": self.limit,
            },
            sort_keys=True,
        )


def parse_search(spec: str, limit: int | None) -> Search:
    """`hub-search:[TEXT][,library=L][,task=T][,author=A][,sort=downloads|likes]`; BadInput otherwise."""
    body = spec[len(SEARCH_PREFIX) :]
    text, kv = "", {}
    for part in [p.strip() for p in body.split(",") if p.strip()]:
        k, eq, v = part.partition("=")
        if not eq:
            if text:
                raise BadInput(f"--source {spec}: two search texts ({text!r}, {part!r}); one, then key=value")
            text = part
            continue
        k, v = k.strip(), v.strip()
        if k not in SEARCH_KEYS or not v:
            raise BadInput(f"--source {spec}: unknown or empty {k!r}; use TEXT and {', '.join(SEARCH_KEYS)}=VALUE")
        kv[k] = v
    sort = kv.get("sort", "downloads")
    if sort not in SORTS:
        raise BadInput(f"--source {spec}: sort={sort!r}; use {' or '.join(SORTS)}")
    return Search(text, kv.get("library", "transformers"), kv.get("task"), kv.get("author"), sort, limit)


@dataclass(frozen=True)
class ListedId:
    model_id: str
    revision: str = ""
    downloads: int | None = None
    likes: int | None = None


def read_id_list(spec: str) -> list[ListedId]:
    """`hub-list:FILE`: `ORG/NAME[@REV] [downloads=N] [likes=N]` per line; BadInput naming the line."""
    path = spec[len(LIST_PREFIX) :] if spec.startswith(LIST_PREFIX) else spec
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--source {spec}: cannot read {path}: {type(e).__name__}: {e}".splitlines()[0]) from e
    out: list[ListedId] = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head, *rest = line.split()
        ident, at, rev = head.removeprefix("hub:").partition("@")
        if not ID_RE.fullmatch(ident) or ident.count("/") > 1 or (at and not REV_RE.fullmatch(rev)):
            raise BadInput(f"--source {spec}:{i}: {head!r} is not a Hub model id (ORG/NAME or ORG/NAME@REVISION)")
        meta: dict[str, int] = {}
        for tok in rest:
            k, eq, v = tok.partition("=")
            if not eq or k not in ("downloads", "likes") or not v.isdigit():
                raise BadInput(f"--source {spec}:{i}: {tok!r}: expected downloads=N or likes=N after the id")
            meta[k] = int(v)
        if (ident, rev) in seen:
            continue
        seen.add((ident, rev))
        out.append(ListedId(ident, rev, meta.get("downloads"), meta.get("likes")))
    if not out:
        raise BadInput(f"--source {spec}: no model ids in {path}")
    return out


# ---- the rate limit -------------------------------------------------------------------------------
class RateLimiter:
    """Token bucket: at most `per_window` acquisitions in ANY `window_s` seconds (the burst plus the refill
    over a window stay under it), shared by threads."""

    def __init__(
        self,
        per_window: int,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.burst = max(float(CALLS_BRANCH), min(20.0, per_window / 100))  # >= the most one acquire asks
        self.rate = max(1e-9, (per_window - self.burst) / window_s)
        self.clock, self.sleep = clock, sleep
        self.tokens = self.burst
        self.at = clock()
        self.lock = threading.Lock()
        self.taken = 0

    def acquire(self, n: int = 1) -> None:
        n = min(n, int(self.burst))
        while True:
            with self.lock:
                now = self.clock()
                self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
                self.at = now
                if self.tokens >= n - 1e-9:  # (float rounding of the refill must not leave it a hair short)
                    self.tokens = max(0.0, self.tokens - n)
                    self.taken += n
                    return
                wait_s = (n - self.tokens) / self.rate
            self.sleep(wait_s)


@dataclass
class Limiters:
    api: RateLimiter
    resolve: RateLimiter

    @classmethod
    def of(cls, limits: Limits) -> Limiters:
        return cls(RateLimiter(limits.api), RateLimiter(limits.resolve))


# ---- discovery ------------------------------------------------------------------------------------
def endpoint() -> str | None:
    """HF_ENDPOINT read now (huggingface_hub reads it once, at import)."""
    e = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return e or None


def cache_dir() -> str | None:
    return os.environ.get("HF_HUB_CACHE") or None


def discover(
    search: Search, index: HubIndex, limiters: Limiters, refresh: bool = False, log: Callable[[str], None] | None = None
) -> list[Entry]:
    """The ids of a search, in the Hub's order, with their metadata (listed now, or the saved listing when it
    completed before, or offline). Network errors are BadInput: nothing can be planned without the list."""
    ids = None if refresh else index.listing(search.key)
    if ids is None:
        if offline():
            raise BadInput(
                f"hub-search: this query was never listed into {index.path} and HF_HUB_OFFLINE is set: "
                "list it where the Hub is reachable and import the export (bringup hub export / "
                "bringup hub import)"
            )
        ids = _list(search, index, limiters, log)
    have = index.all()
    return [have.get((m, "")) or Entry(m) for m in ids]


def _list(search: Search, index: HubIndex, limiters: Limiters, log: Callable[[str], None] | None) -> list[str]:
    from huggingface_hub import HfApi  # lazy: slow huggingface_hub import
    from huggingface_hub.errors import HfHubHTTPError  # lazy: slow huggingface_hub import

    api = HfApi(endpoint=endpoint())
    kw: dict[str, Any] = {
        "filter": search.library or None,
        "pipeline_tag": search.task,
        "author": search.author,
        "search": search.text or None,
        "sort": search.sort,
        "limit": search.limit,
        "expand": EXPAND,
    }
    got: list[Entry] = []
    limiters.api.acquire()
    try:
        for i, m in enumerate(api.list_models(**{k: v for k, v in kw.items() if v is not None})):
            if i and i % PAGE == 0:
                limiters.api.acquire()  # one API call per page of the listing
            got.append(
                Entry(
                    m.id,
                    "",
                    getattr(m, "sha", None),
                    PENDING,
                    "",
                    getattr(m, "downloads", None),
                    getattr(m, "likes", None),
                    _gated(getattr(m, "gated", None)),
                    getattr(m, "private", None),
                    getattr(m, "pipeline_tag", None),
                    getattr(m, "library_name", None),
                )
            )
            if log is not None and len(got) % 10_000 == 0:
                log(f"hub: listed {len(got)} ids")
    except (HfHubHTTPError, OSError, ValueError) as e:
        if got:  # keep what arrived (its metadata), but the listing is not complete: it is listed again next run
            index.merge_meta(got)
            index.save_listing(search.key, [e2.model_id for e2 in got], complete=False)
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise BadInput(f"hub-search: listing failed after {len(got)} ids: {why}") from e
    index.merge_meta(got)
    index.save_listing(search.key, [e.model_id for e in got], complete=True)
    return [e.model_id for e in got]


def _gated(v: Any) -> str | None:
    return None if v is None else str(v)


def listed_entries(ids: list[ListedId], index: HubIndex) -> list[Entry]:
    """hub-list ids with what the index knows (a listing's metadata) and the file's downloads / likes."""
    have = index.all()
    out = []
    for li in ids:
        e = have.get((li.model_id, li.revision))
        if e is None:
            base = have.get((li.model_id, ""))
            e = Entry(
                li.model_id,
                li.revision,
                downloads=base.downloads if base else None,
                likes=base.likes if base else None,
                gated=base.gated if base else None,
            )
        if li.downloads is not None:
            e.downloads = li.downloads
        if li.likes is not None:
            e.likes = li.likes
        out.append(e)
    index.merge_meta([e for e in out if (e.model_id, e.revision) not in have])
    return out


# ---- the fetch ------------------------------------------------------------------------------------
@dataclass
class FetchStats:
    asked: int = 0
    already: int = 0  # in the index from an earlier run
    fetched: Counter[str] = field(default_factory=Counter)  # status -> ids fetched now
    seconds: float = 0.0
    interrupted: bool = False

    def line(self) -> str:
        now = ", ".join(f"{k} {v}" for k, v in sorted(self.fetched.items())) or "nothing"
        return (
            f"hub: {self.asked} id(s): {self.already} known from the index, fetched now: {now} ({self.seconds:.1f} s)"
        )


@dataclass(frozen=True)
class HubAccess:
    """How a fetch thread reaches the Hub: offline or not, the endpoint and cache, the /resolve/ limiter,
    and its retries."""

    off: bool
    endpoint: str | None
    cache: str | None
    limiter: RateLimiter
    tries: int
    backoff_s: float


def fetch(
    entries: list[Entry],
    index: HubIndex,
    limiters: Limiters,
    workers: int = 8,
    tries: int = 4,
    backoff_s: float = 1.0,
    refresh: bool = False,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Entry], FetchStats]:
    """config.json of every entry not settled in the index (all not ok with `refresh`); returns the entries
    as the index now has them, in order. KeyboardInterrupt is re-raised after the finished ones are saved."""
    stats = FetchStats(asked=len(entries))
    todo = [e for e in entries if e.status in RETRY or (refresh and e.status != OK)]
    stats.already = len(entries) - len(todo)
    done: dict[tuple[str, str], Entry] = {}
    t0 = time.monotonic()
    if todo:
        access = HubAccess(offline(), endpoint(), cache_dir(), limiters.resolve, tries, backoff_s)
        say = log or (lambda s: None)
        say(
            f"hub: fetching config.json of {len(todo)} id(s), {workers} at a time, <= "
            f"{limiters.resolve.rate * WINDOW_S + limiters.resolve.burst:.0f} /resolve/ calls per 5 min"
            + (" (HF_HUB_OFFLINE: the cache only)" if access.off else "")
        )
        pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hub-fetch")
        try:
            _drain(pool, todo, index, access, workers, say, stats, done)
        except KeyboardInterrupt:
            stats.interrupted = True
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            stats.seconds = time.monotonic() - t0
            pool.shutdown(wait=not stats.interrupted)
    stats.seconds = time.monotonic() - t0
    return [done.get(e.key, e) for e in entries], stats


def _drain(
    pool: ThreadPoolExecutor,
    todo: list[Entry],
    index: HubIndex,
    access: HubAccess,
    workers: int,
    say: Callable[[str], None],
    stats: FetchStats,
    done: dict[tuple[str, str], Entry],
) -> None:
    """Keep up to 4 x workers fetches in flight; commit each finished batch to the index at once (an
    interrupted fetch keeps them) and into `done`; say how far it got every 5 s."""
    it = iter(todo)
    pending: dict[Future[Entry], Entry] = {}
    last = time.monotonic()

    def top_up() -> None:
        while len(pending) < 4 * max(1, workers):
            e = next(it, None)
            if e is None:
                return
            pending[pool.submit(fetch_one, e, access)] = e

    top_up()
    while pending:
        ready, _ = wait(list(pending), timeout=1.0, return_when=FIRST_COMPLETED)
        got = [f.result() for f in ready]
        for f in ready:
            del pending[f]
        if got:
            index.record(got)  # committed now: an interrupted fetch keeps these
            for g in got:
                done[g.key] = g
                stats.fetched[g.status] += 1
        top_up()
        if time.monotonic() - last > 5.0:
            last = time.monotonic()
            say(
                f"hub: {len(done)}/{len(todo)} fetched ("
                + ", ".join(f"{k} {v}" for k, v in sorted(stats.fetched.items()))
                + ")"
            )


_SHA = re.compile(r"[0-9a-f]{40}")


def _config_path(e: Entry, rev: str | None, a: HubAccess) -> str:
    """config.json's local path: from the cache for a pinned commit, else downloaded (the /resolve/ call
    counted against the limiter; offline: the cache only)."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache  # lazy: slow huggingface_hub import

    cached = try_to_load_from_cache(e.model_id, "config.json", cache_dir=a.cache, revision=rev)
    if isinstance(cached, str) and rev is not None and _SHA.fullmatch(rev):
        return cached
    if not a.off:
        pinned = rev is not None and _SHA.fullmatch(rev)
        a.limiter.acquire(CALLS_PINNED if pinned else CALLS_BRANCH)
    return str(
        hf_hub_download(
            e.model_id, "config.json", revision=rev, cache_dir=a.cache, endpoint=a.endpoint, local_files_only=a.off
        )
    )


def _read_config(path: str) -> tuple[str, str, dict[str, Any] | None, str | None]:
    """(status, reason, config, sha) of a downloaded config.json."""
    sha = Path(path).parent.name if _SHA.fullmatch(Path(path).parent.name) else None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as x:
        return "bad_config", f"config.json is not readable JSON: {type(x).__name__}: {x}"[:300], None, sha
    if not isinstance(data, dict):
        return "bad_config", "config.json is not a JSON object", None, sha
    return OK, "", data, sha


def fetch_one(e: Entry, a: HubAccess) -> Entry:
    """One id's config.json, classified. Runs in a fetch thread; never raises (a bug becomes fetch_error)."""
    from huggingface_hub.errors import (  # lazy: slow huggingface_hub import
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    rev = e.revision or e.sha or None  # pinned to the listed commit: a cached config needs no call at all
    out = Entry(**{**e.__dict__, "tries": e.tries + 1, "fetched_at": time.time()})

    def done(status: str, reason: str = "", config: dict[str, Any] | None = None, sha: str | None = None) -> Entry:
        out.status, out.reason, out.config = status, reason, config
        out.sha = sha or out.sha
        return out

    last = ""
    for attempt in range(max(1, a.tries)):
        try:
            return done(*_read_config(_config_path(e, rev, a)))
        except GatedRepoError:
            return done("gated", "gated on the Hub: accept its licence with this token (hf auth login)")
        except RevisionNotFoundError:
            return done("revision_not_found", f"revision {rev!r} not found on the Hub")
        except RepositoryNotFoundError:
            return done("not_found_or_private", "no such repository, or private to this token")
        except LocalEntryNotFoundError as x:
            if a.off:
                return done("not_cached_offline", "HF_HUB_OFFLINE is set and config.json is not in the cache")
            last = f"{type(x).__name__}: {x}"
        except EntryNotFoundError:
            return done("missing_config", "the repository has no config.json (not a transformers checkpoint)")
        except HfHubHTTPError as x:
            code = getattr(getattr(x, "response", None), "status_code", None)
            if code not in TRANSIENT_STATUS:
                return done("fetch_error", f"HTTP {code}: {x}".splitlines()[0][:300])
            last = f"HTTP {code}"
        except Exception as x:  # connection errors, timeouts, a full disk: retried, then fetch_error
            last = f"{type(x).__name__}: {x}".splitlines()[0]
        if attempt + 1 < a.tries:
            time.sleep(a.backoff_s * (2**attempt) * (0.5 + random.random()))
    return done("fetch_error", f"gave up after {a.tries} tries: {last}"[:300])


def printer(stream: Any = None) -> Callable[[str], None]:
    def say(msg: str) -> None:
        print(msg, file=stream or sys.stderr, flush=True)

    return say
