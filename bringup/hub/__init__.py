"""The Hugging Face Hub, for the zoo: models by id, and sweeps of 100k ids deduplicated by signature (docs/hub.md).

    discovery -> config-only fetch -> signature per id -> (the zoo: one case per signature) -> the answer per id

- refs.py: Hub ids (`hub:ORG/NAME[@REV]`), their config.json and weights in the Hugging Face cache, the shipped
  hub-top catalogue;
- build.py: a config.json -> the model the zoo runs (tiny, or full size on the meta device then initialised);
- fetch.py: discovery (`hub-search:` / `hub-list:`) and the rate-limited, retried, resumable config-only fetch;
- index.py: the Hub index (SQLite) the fetch commits to, exportable to a cluster without the Hub;
- signature.py: what a config computes at tiny size, as one signature;
- plan.py: a sweep's ids -> configs -> distinct signatures (no device);
- summary.py: the answer per id (outcomes by architecture, config failures, worst offenders, the CSV);
- section.py: that answer's part of the zoo's HTML section;
- flags.py: the zoo's Hub-sweep options (torch-free); cli.py: `bringup hub` (fetch, plan, export, import, ...).

The zoo uses the package through these modules' public names (zoo/plan.py, zoo/sweep.py: one case per signature,
zoo/run.py, full.py, fsdp.py); nothing here imports a capability. This file imports nothing, so that
`bringup zoo --help` (flags.py) and `bringup hub --help` (cli.py) stay torch-free.
"""
