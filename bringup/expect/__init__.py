"""Expectations: a CI gate teams can live with (known failures, new failures, new passes, flakes).

file.py (the YAML file, round trip), taxonomy.py (the fixed reasons), classify.py (the rules),
update.py (--update-expect / expect init), gate.py (the hook in the run flow), cli.py (`bringup expect`).
"""
