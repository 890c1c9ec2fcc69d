"""A local stand-in for the Hugging Face Hub: the endpoints huggingface_hub (2.x) calls for `list_models`,
`model_info` and `hf_hub_download`, served from synthetic repos (tests/hub/hub_synth.py). Point `HF_ENDPOINT`
at `url`.

- `GET /api/models?search=&author=&filter=&pipeline_tag=&sort=&limit=&expand=...`: the listing, newest-first
  by `sort` (descending, as the Hub), paginated with a `Link: <...>; rel="next"` header (huggingface_hub's
  `paginate`); private repos are not listed.
- `GET /api/models/{id}[/revision/{rev}]`: model info (401 RepoNotFound for private or missing repos).
- `HEAD|GET /{id}/resolve/{rev}/{file}`: on a branch name, a relative 307 redirect to the commit's URL (as the
  Hub does; `hf_hub_download` follows redirects on the same host); at a commit, 200 with `X-Repo-Commit`,
  `ETag` (the content's git blob sha) and `Content-Length`, which hf_hub_download requires. Errors carry the
  Hub's `X-Error-Code` header, which huggingface_hub maps to its exceptions: `RepoNotFound` (401, also for
  private repos without a token), `GatedRepo` (401), `RevisionNotFound` (404), `EntryNotFound` (404, with
  `X-Repo-Commit`). A flaky repo answers 503 first.
- Rate limits per 5-minute bucket like the Hub's (api, resolvers), when `limits` is given: past the limit a
  429 with the Hub's `RateLimit` / `RateLimit-Policy` headers. Every request is logged (method, path, bucket,
  status) for the tests to count.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from tests.hub.hub_synth import Repo


@dataclass
class Logged:
    method: str
    path: str
    bucket: str
    status: int


@dataclass
class StandIn:
    repos: Iterable[Repo]
    page_size: int = 100
    limits: dict[str, int] | None = None  # bucket -> requests per window (None: no limit)
    window_s: float = 300.0
    delay_s: float = 0.0  # every /resolve/ answer waits this long (a slow Hub: time to interrupt a fetch)
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_id = {r.id: r for r in self.repos}
        self.lock = threading.Lock()
        self.windows: dict[str, tuple[float, int]] = {}
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # ---- life cycle -----------------------------------------------------------------------------
    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                hub.handle(self, "GET")

            def do_HEAD(self) -> None:
                hub.handle(self, "HEAD")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="hub-standin", daemon=True)
        self.thread.start()
        return self.url

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> StandIn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def count(self, bucket: str | None = None, contains: str = "", status: int | None = None) -> int:
        with self.lock:
            return sum(
                1
                for e in self.log
                if (bucket is None or e.bucket == bucket)
                and contains in e.path
                and (status is None or e.status == status)
            )

    # ---- requests -------------------------------------------------------------------------------
    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        bucket = "api" if path.startswith("/api/") else "resolvers" if "/resolve/" in path else "pages"
        if self.delay_s and bucket == "resolvers":
            time.sleep(self.delay_s)
        status, headers, body = self._limited(bucket) or self._route(method, path, parse_qs(parts.query), h)
        with self.lock:
            self.log.append(Logged(method, h.path, bucket, status))
        h.send_response(status)
        headers = {"Content-Length": str(len(body)), **headers}
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if method != "HEAD" and body:
            h.wfile.write(body)

    def _limited(self, bucket: str) -> tuple[int, dict[str, str], bytes] | None:
        if not self.limits or bucket not in self.limits:
            return None
        now = time.monotonic()
        with self.lock:
            start, n = self.windows.get(bucket, (now, 0))
            if now - start >= self.window_s:
                start, n = now, 0
            n += 1
            self.windows[bucket] = (start, n)
        limit = self.limits[bucket]
        if n <= limit:
            return None
        left = max(1, int(self.window_s - (now - start)))
        policy = f'"fixed window";"{bucket}";q={limit};w={int(self.window_s)}'
        return 429, {"RateLimit": f'"{bucket}";r=0;t={left}', "RateLimit-Policy": policy}, b""

    def _route(
        self, method: str, path: str, q: dict[str, list[str]], h: BaseHTTPRequestHandler
    ) -> tuple[int, dict[str, str], bytes]:
        if path == "/api/models":
            return self._list(q, h)
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/") :]
            rid, _, rev = rest.partition("/revision/")
            return self._info(rid, rev or None)
        if "/resolve/" in path:
            rid, _, tail = path.lstrip("/").partition("/resolve/")
            rev, _, filename = tail.partition("/")
            return self._resolve(method, rid, rev, filename)
        return 404, {}, b"not found"

    def _json(self, obj: Any, status: int = 200, **headers: str) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json", **headers}, json.dumps(obj).encode()

    def _error(self, status: int, code: str | None, msg: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
        hdrs = {"X-Error-Message": msg, **headers}
        if code:
            hdrs["X-Error-Code"] = code
        return self._json({"error": msg}, status, **hdrs)

    def _list(self, q: dict[str, list[str]], h: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        repos = [r for r in self.by_id.values() if not r.private]
        if q.get("search"):
            s = q["search"][0].lower()
            repos = [r for r in repos if s in r.id.lower()]
        if q.get("author"):
            repos = [r for r in repos if r.id.split("/")[0] == q["author"][0]]
        for f in q.get("filter", []):
            repos = [r for r in repos if f == r.library or f in r.info()["tags"]]
        if q.get("pipeline_tag"):
            repos = [r for r in repos if r.pipeline_tag == q["pipeline_tag"][0]]
        key = (q.get("sort") or ["downloads"])[0]
        if key in ("downloads", "likes"):
            repos.sort(key=lambda r: (-getattr(r, key), r.id))
        else:
            repos.sort(key=lambda r: r.id)
        start = int((q.get("cursor") or ["0"])[0])
        size = min(self.page_size, int((q.get("limit") or [str(self.page_size)])[0]))
        page = repos[start : start + size]
        expand = q.get("expand") or q.get("expand[]")
        rows = [
            {k: v for k, v in r.info().items() if k in ("id", "_id", *expand)} if expand else r.info() for r in page
        ]
        headers: dict[str, str] = {}
        if start + size < len(repos):
            nq = {k: v for k, v in q.items() if k != "cursor"}
            nq["cursor"] = [str(start + size)]
            host = h.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"  # type: ignore[union-attr]
            headers["Link"] = f'<http://{host}/api/models?{urlencode(nq, doseq=True)}>; rel="next"'
        return self._json(rows, **headers)

    def _repo(self, rid: str) -> Repo | None:
        r = self.by_id.get(rid)
        return None if r is None or r.private else r

    def _info(self, rid: str, rev: str | None) -> tuple[int, dict[str, str], bytes]:
        r = self._repo(rid)
        if r is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if rev not in (None, "main", r.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return self._json(r.info())

    def _resolve(self, method: str, rid: str, rev: str, filename: str) -> tuple[int, dict[str, str], bytes]:
        r = self._repo(rid)
        if r is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        with self.lock:
            if r.flaky > 0:
                r.flaky -= 1
                return 503, {}, b"busy"
        if r.gated:
            return self._error(401, "GatedRepo", "Access to this model is restricted: you must accept its conditions")
        if rev == "main":
            return 307, {"Location": f"/{rid}/resolve/{r.sha}/{quote(filename)}", "X-Repo-Commit": r.sha}, b""
        if rev != r.sha:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        body = r.files.get(filename)
        if body is None:
            return self._error(404, "EntryNotFound", f"{filename} does not exist", **{"X-Repo-Commit": r.sha})
        blob = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
        return 200, {"X-Repo-Commit": r.sha, "ETag": f'"{blob}"', "Content-Type": "application/octet-stream"}, body
