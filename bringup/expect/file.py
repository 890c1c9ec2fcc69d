"""The expectations file: YAML, keyed by device type and torch version, one entry per case.

    # comments anywhere are kept by --update-expect (ruamel.yaml round trip)
    version: 1
    devices:
      testdev:                      # a device type (cpu, cuda, xpu, neuron, a PrivateUse1 name) or "*"
        "2.13":                     # torch "2.13.0", "2.13" (major.minor) or "*" (any)
          zoo/gpt2 inductor:        # "<suite>/<case name>", as the terminal prints it
            status: fail_numeric    # the status the case is expected to end with
            reason: numeric         # one of taxonomy.REASONS (required unless status is pass)
            link: https://...       # optional: the bug
            graph_breaks: 5         # optional: the expected graph-break count (zoo)
            flaky: [pass, fail_numeric]   # optional: statuses the case is known to alternate between

A case not listed is expected to `pass`. Which section applies to a run: the device type exactly,
else "*"; inside it the torch version exactly, else its major.minor, else "*", else the nearest
listed version (the newest older one, else the oldest newer one): the nearest-version fallback.
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.case import Status
from bringup.errors import BadInput
from bringup.expect.taxonomy import REASONS

ENTRY_KEYS = ("status", "reason", "flaky", "graph_breaks", "link", "note")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Expectation:
    key: str
    status: Status
    reason: str = ""
    link: str = ""
    graph_breaks: int | None = None
    flaky: frozenset[Status] = frozenset()
    note: str = ""  # free text; an imported upstream row keeps its cells here (expect/xpu_csv.py)

    @property
    def allowed(self) -> frozenset[Status]:
        return self.flaky | {self.status}


PASS = Expectation("", Status.PASS)


def _yaml() -> Any:
    from ruamel.yaml import YAML  # lazy: torch-free --help

    y = YAML()  # round trip: comments, key order and quoting survive load -> dump
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def torch_key(version: str) -> tuple[int, ...] | None:
    """ "2.13.0+cpu" -> (2, 13, 0); "2.13" -> (2, 13); anything else -> None."""
    base = version.split("+")[0]
    parts = []
    for p in base.split("."):
        digits = "".join(ch for ch in p if ch.isdigit()) if p[:1].isdigit() else ""
        if not digits:
            return None
        parts.append(int(digits))
        if not p.isdigit():  # "0a0", "1rc1": the rest is a pre-release tag
            break
    return tuple(parts) or None


def device_type(device: str) -> str:
    return device.split(":")[0]


def minor_key(version: str) -> str:
    k = torch_key(version)
    return ".".join(map(str, k[:2])) if k else version


class ExpectFile:
    """One loaded (or new) expectations file; `doc` is the round-trip document that save() writes."""

    def __init__(self, path: str | Path, doc: Any) -> None:
        self.path = Path(path)
        self.doc = doc

    # ---- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, missing_ok: bool = False) -> ExpectFile:
        p = Path(path)
        if not p.exists():
            if missing_ok:
                return cls.new(p)
            raise BadInput(f"--expect {p}: no such file (start one with `bringup expect init RUN --out {p}`)")
        if p.is_dir():
            raise BadInput(f"--expect {p} is a directory")
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"--expect {p}: cannot read it ({e})") from None
        try:
            doc = _yaml().load(text)
        except Exception as e:  # ruamel's YAMLError and its scanner/parser errors
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            what = getattr(e, "problem", None) or type(e).__name__
            raise BadInput(f"--expect {p}: not valid YAML ({what}{where})") from None
        f = cls(p, doc)
        f.validate()
        return f

    @classmethod
    def new(cls, path: str | Path) -> ExpectFile:
        doc = _yaml().load(
            "# bringup expectations: the status each case is expected to end with, per device type and\n"
            "# torch version. A case not listed is expected to pass. Reasons: " + ", ".join(REASONS) + ".\n"
            "# Check a run against it with `bringup run --expect FILE`; see docs/expect.md.\n"
            f"version: {FORMAT_VERSION}\ndevices: {{}}\n"
        )
        doc["devices"].fa.set_block_style()
        return cls(path, doc)

    def _bad(self, node: Any, key: Any, msg: str) -> BadInput:
        line = ""
        try:
            if key is not None:
                line = f":{node.lc.key(key)[0] + 1}"
            else:
                line = f":{node.lc.line + 1}"
        except Exception:
            pass
        return BadInput(f"--expect {self.path}{line}: {msg}")

    def validate(self) -> None:
        from ruamel.yaml.comments import CommentedMap  # lazy: torch-free --help

        d = self.doc
        if not isinstance(d, CommentedMap):
            raise BadInput(f"--expect {self.path}: expected a mapping with 'version' and 'devices' at the top")
        extra = set(d) - {"version", "devices"}
        if extra:
            k = sorted(map(str, extra))[0]
            raise self._bad(d, k, f"unknown top-level key {k!r} (allowed: version, devices)")
        if d.get("version") != FORMAT_VERSION:
            raise self._bad(
                d,
                "version" if "version" in d else None,
                f"'version' must be {FORMAT_VERSION}, got {d.get('version')!r}",
            )
        devices = d.get("devices")
        if devices is None:
            raise self._bad(d, None, "missing 'devices' mapping")
        if not isinstance(devices, dict):
            raise self._bad(d, "devices", "'devices' must be a mapping of device type -> torch version -> cases")
        for dev, versions in devices.items():
            if not isinstance(versions, dict):
                raise self._bad(devices, dev, f"device {dev!r}: expected a mapping of torch version -> cases")
            for ver, cases in versions.items():
                if str(ver) != "*" and torch_key(str(ver)) is None:
                    raise self._bad(versions, ver, f'torch version key {ver!r}: use e.g. "2.13", "2.13.0" or "*"')
                if cases is None:
                    continue
                if not isinstance(cases, dict):
                    raise self._bad(versions, ver, f"{dev}/{ver}: expected a mapping of case -> expectation")
                for key, entry in cases.items():
                    self._entry(cases, str(key), entry)

    def _entry(self, cases: Any, key: str, e: Any) -> Expectation:
        if not isinstance(e, dict):
            raise self._bad(cases, key, f"case {key!r}: expected a mapping with at least 'status'")
        unknown = [k for k in e if k not in ENTRY_KEYS]
        if unknown:
            allowed = ", ".join(ENTRY_KEYS)
            raise self._bad(e, unknown[0], f"case {key!r}: unknown key {unknown[0]!r} (allowed: {allowed})")
        statuses = {s.value for s in Status}
        if "status" not in e:
            raise self._bad(cases, key, f"case {key!r}: missing 'status'")
        if str(e["status"]) not in statuses:
            one_of = ", ".join(sorted(statuses))
            raise self._bad(e, "status", f"case {key!r}: unknown status {e['status']!r} (one of: {one_of})")
        status = Status(str(e["status"]))
        reason = str(e.get("reason") or "")
        if reason and reason not in REASONS:
            raise self._bad(e, "reason", f"case {key!r}: reason {reason!r} is not one of: {', '.join(REASONS)}")
        if not reason and status is not Status.PASS:
            raise self._bad(
                e, "status", f"case {key!r}: a '{status.value}' expectation needs a 'reason' ({', '.join(REASONS)})"
            )
        gb = e.get("graph_breaks")
        if gb is not None and (isinstance(gb, bool) or not isinstance(gb, int) or gb < 0):
            raise self._bad(e, "graph_breaks", f"case {key!r}: graph_breaks must be an integer >= 0, got {gb!r}")
        flaky = e.get("flaky") or []
        if not isinstance(flaky, list) or any(str(s) not in statuses for s in flaky):
            raise self._bad(e, "flaky", f"case {key!r}: flaky must be a list of statuses, got {flaky!r}")
        link = e.get("link") or ""
        if not isinstance(link, str):
            raise self._bad(e, "link", f"case {key!r}: link must be a string")
        note = str(e.get("note") or "")
        return Expectation(key, status, reason, link, gb, frozenset(Status(str(s)) for s in flaky), note)

    # ---- selecting a section -----------------------------------------------------------------------
    def select(self, device: str, torch_version: str) -> tuple[str, str] | None:
        """(device key, version key) of the section that applies, or None (nothing listed: all pass)."""
        devices = self.doc.get("devices") or {}
        dt = device_type(device)
        dkey = dt if dt in devices else ("*" if "*" in devices else None)
        if dkey is None:
            return None
        versions = {str(k): k for k in (devices[dkey] or {})}
        if not versions:
            return None
        full = ".".join(map(str, torch_key(torch_version) or ())) or torch_version
        for want in (torch_version.split("+")[0], full, minor_key(torch_version), "*"):
            if want in versions:
                return dkey, want
        cur = torch_key(torch_version) or ()
        listed = sorted((k, s) for s in versions if s != "*" and (k := torch_key(s)) is not None)
        older = [s for k, s in listed if k <= cur]
        newer = [s for k, s in listed if k > cur]
        pick = older[-1] if older else (newer[0] if newer else None)
        return (dkey, pick) if pick is not None else None

    def _section_node(self, sel: tuple[str, str]) -> Any:
        versions = self.doc["devices"][sel[0]]
        key = next(k for k in versions if str(k) == sel[1])
        return versions[key]

    def expectations(self, sel: tuple[str, str] | None) -> dict[str, Expectation]:
        if sel is None:
            return {}
        cases = self._section_node(sel) or {}
        return {str(k): self._entry(cases, str(k), v) for k, v in cases.items()}

    def target_section(self, device: str, torch_version: str, sel: tuple[str, str] | None) -> Any:
        """The mapping --update-expect writes: the selected section when it is this device type's own
        section for this torch (exact, major.minor or "*"); else a new "<device>"/"<major.minor>" section,
        seeded with a copy of the fallback's entries (the older torch's expectations stay as they were)."""
        from ruamel.yaml.comments import CommentedMap  # lazy: torch-free --help

        dt, mk = device_type(device), minor_key(torch_version)
        own = {torch_version.split("+")[0], ".".join(map(str, torch_key(torch_version) or ())), mk, "*"}
        if sel is not None and sel[0] == dt and sel[1] in own:
            node = self._section_node(sel)
            if node is None:
                versions = self.doc["devices"][sel[0]]
                key = next(k for k in versions if str(k) == sel[1])
                versions[key] = node = CommentedMap()
            return node
        devices = self.doc.setdefault("devices", CommentedMap())
        if devices is None:
            self.doc["devices"] = devices = CommentedMap()
        if dt not in devices or devices[dt] is None:
            devices[dt] = CommentedMap()
        seed = self._section_node(sel) if sel is not None else None
        node = CommentedMap()
        for k, v in (seed or {}).items():
            node[k] = copy.deepcopy(v)
        devices[dt][mk] = node
        return node

    # ---- writing -----------------------------------------------------------------------------------
    def dumps(self) -> str:
        buf = io.StringIO()
        _yaml().dump(self.doc, buf)
        return buf.getvalue()

    def save(self, path: str | Path | None = None) -> Path:
        from bringup.files import atomic_write_text  # lazy: torch-free --help

        return atomic_write_text(path or self.path, self.dumps())
