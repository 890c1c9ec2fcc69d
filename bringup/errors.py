"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class BadInput(Exception):
    """Bad device, model id, file, flag... The message is the whole line the user sees."""
