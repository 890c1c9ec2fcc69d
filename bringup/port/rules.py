"""The rule table of `bringup port`: one stable code per kind of CUDA-only construct.

The matching and the rewrites live in `codemod.py` (one libcst pass, so that rules that share a
construct - a "cuda" string inside `torch.device(...)` inside `.to(...)` - agree on one rewrite);
this table is what users see: code, title, and what `--fix` does or what to do by hand.
`docs/port.md` documents every code here with an example (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

# The name `--fix` introduces once per module (after the imports) when a rewrite needs the device:
#     DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
# A different name is chosen when DEVICE is already used in the module.
DEVICE_NAME = "DEVICE"
DEVICE_NAME_FALLBACKS = ("ACCEL_DEVICE", "PORT_DEVICE")


@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    fix: str  # what --fix does ("" when the rule is never fixed automatically)
    manual: str  # what to do by hand when the construct cannot be rewritten safely


PARSE_ERROR = "BU000"

RULES: tuple[Rule, ...] = (
    Rule(
        PARSE_ERROR,
        "file could not be parsed or checked (left untouched)",
        "",
        "fix the syntax error (or report the internal error); nothing in the file was checked",
    ),
    Rule(
        "BU101",
        "`.cuda()` call",
        "`.to(DEVICE)` (an int index i: `.to(torch.device(DEVICE.type, i))`)",
        "`.to(DEVICE)`",
    ),
    Rule(
        "BU102",
        '"cuda" / "cuda:N" device literal in a device argument',
        '`DEVICE` (or `DEVICE.type` where a string is expected; "cuda:N" keeps its index)',
        "",
    ),
    Rule(
        "BU103",
        '"cuda" device string used as a value (assignment, default, branch)',
        '`DEVICE.type` (the same string, "cuda", on a CUDA machine)',
        "",
    ),
    Rule(
        "BU104",
        'device compared with "cuda"',
        "",
        'compare with `DEVICE.type`, or test `device.type != "cpu"` for "any accelerator"',
    ),
    Rule("BU105", "`pin_memory(device=...)`", "`pin_memory()` (pins for the current accelerator)", ""),
    Rule("BU106", "`.is_cuda`", "", '`t.device.type == DEVICE.type` (or `t.device.type != "cpu"`)'),
    Rule(
        "BU110",
        "torch.cuda device queries and synchronisation",
        "`torch.accelerator.*` (is_available, device_count, current_device_index, set_device_index, "
        "synchronize, device_index); side effects guarded by `torch.accelerator.is_available()`",
        "`torch.accelerator.device_index(i)` for an int index",
    ),
    Rule(
        "BU111",
        "torch.cuda memory functions",
        "`torch.accelerator.*` memory functions, guarded so cpu-only runs keep the old 0 / no-op",
        "no device-generic equivalent: keep it behind `if torch.accelerator.is_available()` or drop it",
    ),
    Rule(
        "BU112",
        "torch.cuda streams and events",
        "`torch.Event`, `torch.Stream`, `torch.accelerator.current_stream` / `set_stream`",
        "`with stream:` (torch.Stream is a context manager) or `torch.accelerator.set_stream(s)`",
    ),
    Rule(
        "BU113",
        "torch.cuda random-number state",
        "",
        "`torch.manual_seed(s)` seeds cpu and every accelerator; "
        "`torch.get_device_module(DEVICE).manual_seed(s)` where the backend has it",
    ),
    Rule(
        "BU114",
        "torch.cuda device properties",
        "",
        "`torch.accelerator.get_device_capability()` (a dict: supported dtypes) or "
        "`torch.get_device_module(DEVICE).get_device_name()` where the backend has it",
    ),
    Rule(
        "BU115",
        "NVTX ranges (torch.cuda.nvtx)",
        "",
        "`torch.profiler.record_function(name)`: shows in torch.profiler traces on every device",
    ),
    Rule(
        "BU116",
        "CUDA graphs",
        "",
        "`torch.accelerator.Graph` (torch >= 2.13, where the backend supports graphs), "
        'or `torch.compile(mode="reduce-overhead")`',
    ),
    Rule("BU117", "torch.cuda.OutOfMemoryError", "`torch.OutOfMemoryError` (the same class)", ""),
    Rule(
        "BU118",
        "legacy CUDA tensor types (torch.cuda.FloatTensor, ...)",
        "",
        "`torch.empty(..., dtype=torch.float32, device=DEVICE)`, `torch.set_default_device(DEVICE)`",
    ),
    Rule(
        "BU119",
        "other torch.cuda API",
        "a bare `torch.cuda` module -> `torch.get_device_module(DEVICE)`",
        "`torch.get_device_module(DEVICE).<name>` where the backend provides it, or a `torch.accelerator` API",
    ),
    Rule("BU120", "torch.cuda.amp.autocast", "`torch.autocast(DEVICE.type, ...)`", ""),
    Rule("BU121", "torch.cuda.amp.GradScaler", "`torch.amp.GradScaler(DEVICE.type, ...)`", ""),
    Rule("BU122", 'autocast / GradScaler with device type "cuda"', "`DEVICE.type`", ""),
    Rule("BU123", "torch.cuda.amp.custom_fwd / custom_bwd", "`torch.amp.custom_fwd(device_type=DEVICE.type)`", ""),
    Rule(
        "BU130",
        "torch.backends.cuda / torch.backends.cudnn flags",
        "",
        'CUDA-only knobs (harmless elsewhere): for TF32 use `torch.set_float32_matmul_precision("high")`; '
        "mark deliberate ones `# cuda-ok`",
    ),
    Rule(
        "BU131",
        '"nccl" process-group backend',
        "`torch.distributed.get_default_backend_for_device(DEVICE)`",
        "compare with `torch.distributed.get_backend()` of the group instead",
    ),
    Rule(
        "BU132",
        "CUDA environment variable set from Python",
        "",
        "each backend has its own (HIP_VISIBLE_DEVICES, ZE_AFFINITY_MASK, NEURON_RT_VISIBLE_CORES...); "
        "PYTORCH_CUDA_ALLOC_CONF -> PYTORCH_ALLOC_CONF",
    ),
)

CODES: frozenset[str] = frozenset(r.code for r in RULES)


def rule(code: str) -> Rule:
    for r in RULES:
        if r.code == code:
            return r
    raise KeyError(code)


def parse_select(spec: str | None) -> set[str] | None:
    """`--select BU101,BU11` -> the set of codes (a prefix selects every code it starts); ValueError if unknown."""
    if spec is None:
        return None
    out: set[str] = set()
    for part in (p.strip().upper() for p in spec.split(",")):
        if not part:
            continue
        hit = {c for c in CODES if c.startswith(part)}
        if not hit:
            raise ValueError(f"unknown rule code {part!r} (codes: {', '.join(sorted(CODES))})")
        out |= hit
    if not out:
        raise ValueError("empty rule selection")
    return out
