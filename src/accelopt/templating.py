"""The Jinja2 environments accelopt renders with, one rule for all: templates are package data,
and a missing variable is an error (``StrictUndefined``), never an empty string in a prompt, a
page or a file. What differs is the kind of text:

- ``html`` (the reports, the dashboard): auto-escaped, block tags leave no blank lines;
- ``text`` (the agents' prompts): not escaped, block tags leave no blank lines;
- ``source`` (the files ``accelopt export`` writes: Python, C, Markdown): not escaped, and every
  line and the final newline exactly as the template has them.
"""

from __future__ import annotations

from typing import Literal

import jinja2

Kind = Literal["html", "text", "source"]


def environment(package: str, folder: str = "templates", *, kind: Kind) -> jinja2.Environment:
    """The environment of the templates in ``folder`` of ``package``, for ``kind`` of text."""
    verbatim = kind == "source"
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, folder),
        undefined=jinja2.StrictUndefined,
        autoescape=kind == "html",
        keep_trailing_newline=verbatim,
        trim_blocks=not verbatim,
        lstrip_blocks=not verbatim,
    )
