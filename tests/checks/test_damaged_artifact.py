"""The damaged-artifact classifier (bringup/checks/errors.py: damaged_artifact, artifact_paths): what the loader,
the linker and the compiler say about a compile artifact a kill left empty or cut off (real messages, collected
on this machine: torch 2.13 inductor, glibc's dlopen, GNU ld, GCC) is seen; real bugs with close wording are not."""

from __future__ import annotations

import pytest

from bringup.checks.errors import artifact_paths, damaged_artifact

DAMAGED = [
    # inductor loading a kernel library a killed link left empty (the issue's own message)
    "InductorError: ImportError: /tmp/torchinductor_u/oc/coce4srkw555w7b72msbs7bytf77sf4wi36tkeswkz7khi.main.so: "
    "file too short",
    # dlopen of a library cut off inside its headers, or one of zeros
    "OSError: /tmp/torchinductor_u/5u/c5ujs3kvmvyoik.so: cannot read file data",
    "OSError: /tmp/torchinductor_u/5u/c5ujs3kvmvyoik.so: invalid ELF header",
    "ImportError: /tmp/x/ab/cabc.so: ELF load command past end of file",
    "ImportError: /tmp/x/ab/cabc.so: ELF load command address/offset not properly aligned",
    # ld on a cut-off object of a two-step build, and on one of zeros
    "CppCompileError: C++ compile error\n/usr/bin/ld: error: /tmp/x/ab/cabc.optimized.o: file too short\n"
    "collect2: error: ld returned 1 exit status",
    "/usr/bin/ld: /tmp/x/ab/cabc.main.o: file not recognized: file truncated",
    "/tmp/x/ab/cabc.main.o: file not recognized: file format not recognized",
    # g++ on a cut-off precompiled header (it names no file)
    "cc1plus: error: while reading precompiled header: No such file or directory",
    "cc1plus: warning: ./h.h.gch: too short to be a PCH file [-Winvalid-pch]",
    # a cut-off pickle, read by a compile cache
    'File ".../torch/_inductor/codecache.py", line 2127, in _lookup_graph\n_pickle.UnpicklingError: '
    "pickle data was truncated",
    'File ".../torch/_functorch/_aot_autograd/autograd_cache.py", line 900, in load\nEOFError: Ran out of input',
]
NOT_DAMAGED = [
    "InductorError: CppCompileError: C++ compile error: error: 'foo' was not declared in this scope",
    "ImportError: /tmp/x/ab/cabc.so: undefined symbol: _ZN3c104cuda",  # a build problem, not a cut-off file
    "ModuleNotFoundError: No module named 'triton'",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)",
    "OSError: libcudart.so.12: cannot open shared object file: No such file or directory",
    # a cut-off pickle that no compile cache read: some other bug
    'File "/data/loader.py", line 3, in load\n_pickle.UnpicklingError: pickle data was truncated',
    "EOFError: Ran out of input",
    "fail_numeric: 21/23 tensors off; worst logits: rel_rmse 0.385 (file: short.py)",
]


@pytest.mark.parametrize("text", DAMAGED)
def test_damage_is_seen(text: str) -> None:
    assert damaged_artifact(text)


@pytest.mark.parametrize("text", NOT_DAMAGED)
def test_other_failures_are_not_damage(text: str) -> None:
    assert damaged_artifact(text) is None


def test_the_paths_an_error_names() -> None:
    assert artifact_paths(DAMAGED[0]) == [
        "/tmp/torchinductor_u/oc/coce4srkw555w7b72msbs7bytf77sf4wi36tkeswkz7khi.main.so"
    ]
    assert artifact_paths(DAMAGED[5]) == ["/tmp/x/ab/cabc.optimized.o"]
    text = "a /x/y.h.gch, then /x/y.h.gch again, /lib/libfoo.so.1 (a versioned system library) and /a/b.so."
    assert artifact_paths(text) == ["/x/y.h.gch", "/a/b.so"]
