"""bringup triage: from a run's failing cases to the bugs behind them (signatures, groups ranked by reach, one
checked standalone repro per group, issue-ready Markdown, bisection). docs/triage.md."""
