"""Errors a user can hit. Each carries one sentence that says what to do; the CLI prints it and
exits with status 2. A failing kernel is never one of these: it is an Evaluation with a status."""


class UserError(Exception):
    """A mistake or a missing piece on the user's side (bad argument, missing tool)."""


class CompilerNotFoundError(UserError):
    """No working C compiler was found."""
