"""bisect: name the release that broke a case (or fixed it).

`bringup bisect TARGET --between OLD NEW` runs one case (a repro script, or a case of a stored run) in a
fresh environment per candidate (releases of a package from the index pip is configured with, a
directory of wheels, or explicit requirement sets) and finds the first candidate whose verdict differs
from the old endpoint's: endpoints first, then halves.

    args.py     the torch-free face: the command, its options, `BisectOptions` (built once from argv)
    spec.py     what is bisected: requirement sets, candidates, the target, the run settings (frozen)
    candidates.py  candidates from the index, a wheel directory or explicit sets
    envs.py     the environment cache: one venv per exact requirement set, locked, LRU-pruned by size
    target.py   one candidate's runs in its env: a repro's exit code or a stored case's status -> verdict
    child.py    inside a candidate env: re-run one stored case through that env's own bringup
    plan.py     the search, pure: which candidates next, and the conclusion
    run.py      the worker entries (a candidate, a follow-up: localize / PyTorch's compiler bisector)
    cli.py      the command: plan -> rounds through the runner (local or Ray) -> answer; resume
    answer.py   the answer (JSON, terminal); section.py the HTML section; suite.py registers it
"""
