"""Errors a user can hit. Each carries one sentence that says what to do; the CLI prints it and
exits with status 2. A failing kernel is never one of these: it is an Evaluation with a status."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A mistake or a missing piece on the user's side (bad argument, missing tool)."""


class CompilerNotFoundError(UserError):
    """No working C compiler was found."""


def check_user_file(path: Path, what: str, hint: str) -> Path:
    """``path`` when it names an existing file; else a UserError saying that it is a directory
    or does not exist, then ``hint`` (what to do). ``what``: e.g. "kernel file"."""
    if path.is_dir():
        raise UserError(f"{what} {str(path)!r} is a directory, not a file: {hint}")
    if not path.exists():
        raise UserError(f"{what} {str(path)!r} does not exist: {hint}")
    return path


def read_user_text(path: Path, what: str, hint: str) -> str:
    """The UTF-8 text of a file the user named; a UserError (one sentence) when it is missing, a
    directory, unreadable or not UTF-8."""
    check_user_file(path, what, hint)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{what} {str(path)!r} is not UTF-8 text (an invalid byte at offset {exc.start}): "
            "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise UserError(
            f"cannot read {what} {str(path)!r} ({exc.strerror or exc}): {hint}"
        ) from None
