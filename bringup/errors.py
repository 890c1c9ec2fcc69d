"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""

import re


class BadInput(Exception):
    """Bad device, model id, file, flag... The message is the whole line the user sees."""


def user_regex(pattern: str, option: str) -> re.Pattern[str]:
    """A regex the user passed with `option` (--filter, --only), compiled; a bad one is BadInput."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise BadInput(f"bad {option} regex {pattern!r}: {e}") from None
