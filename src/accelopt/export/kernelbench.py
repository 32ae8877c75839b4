"""An imported KernelBench problem's export also holds ``model_new.py``: KernelBench's solution
form, a ``ModelNew`` with ``Model``'s constructor and ``forward`` that calls the exported kernel
with the model's own parameters (the import's ``parameter`` arguments, by state_dict key)."""

from __future__ import annotations

import json

from accelopt import templating
from accelopt.problems.records import Problem

_template = templating.environment("accelopt.export", kind="source").get_template(
    "model_new.py.jinja"
)


def model_new(problem: Problem, module: str, authored: str) -> str | None:
    """The text of ``model_new.py`` (it reads ``model.py`` beside it, written by ``copy_model``),
    or None for a problem that was not imported from KernelBench; ``authored``: who wrote the
    kernel (``Source.authored``)."""
    meta_path = problem.directory / "import.json"
    if not meta_path.is_file() or not (problem.directory / "model.py").is_file():
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if "arguments" not in meta or "file" not in meta:
        return None
    arguments = meta["arguments"]
    return _template.render(
        problem=problem,
        module=module,
        authored=authored,
        file=meta["file"],
        n_inputs=sum(a["role"] == "input" for a in arguments),
        parameters=[list(a["keys"]) for a in arguments if a["role"] == "parameter"],
    )


def model_source(problem: Problem) -> str:
    """The KernelBench file as imported (its own sizes): ``model.py`` of the export."""
    return (problem.directory / "model.py").read_text(encoding="utf-8")
