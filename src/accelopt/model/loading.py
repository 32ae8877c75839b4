"""A user's model: a file or module with KernelBench's names (``Model``, ``get_inputs``,
``get_init_inputs``), built in eval mode with its inputs; and its Dynamo graph, captured once."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt.errors import UserError


@dataclass
class LoadedModel:
    name: str  # what the user gave
    model: Any  # the nn.Module, in eval mode
    make_inputs: Any  # get_inputs: fresh inputs on each call


def load_model(target: str, inputs: str | None = None) -> LoadedModel:
    """``target``: a Python file, or a module path (``pkg.mod``, ``pkg.mod:Attr``); the model is
    ``Attr`` (default ``Model``) built from ``get_init_inputs()``. ``inputs``: where the inputs
    come from (``pkg.mod:fn`` or ``file.py:fn``), default the target's ``get_inputs``. A model
    object (not a class) is used as it is."""
    module, attr = _resolve(target, "Model")
    source, fn = _resolve(inputs, "get_inputs") if inputs else (module, "get_inputs")
    missing = [f"{n}" for m, n in ((module, attr), (source, fn)) if not hasattr(m, n)]
    if missing:
        raise UserError(
            f"{target} has no {' or '.join(missing)}: give a file with a Model (an nn.Module), "
            "get_inputs() and optionally get_init_inputs(), as KernelBench's problems have "
            "(or --inputs pkg.mod:fn)"
        )
    found = getattr(module, attr)
    try:
        model = (
            found(*getattr(module, "get_init_inputs", list)()) if isinstance(found, type) else found
        )
        model = model.eval()
    except Exception as exc:
        raise UserError(f"{target}: building {attr}(*get_init_inputs()) failed: {exc}") from None
    return LoadedModel(target, model, getattr(source, fn))


def _resolve(spec: str, default: str) -> tuple[Any, str]:
    """(the module, the attribute) that ``spec`` names: ``file.py``, ``pkg.mod``, either with
    ``:attr``."""
    path, attr = spec, default
    if ":" in spec and not Path(spec).exists():
        path, attr = spec.rsplit(":", 1)
    return (_file_module(Path(path)) if path.endswith(".py") else _module(path)), attr


def _file_module(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"no model file {str(path)!r}: give a .py file with a Model")
    name = f"_accelopt_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UserError(f"{path} failed to import: {type(exc).__name__}: {exc}") from None
    return module


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UserError(
            f"cannot import {name!r} ({exc}): give a .py file or an importable module"
        ) from None


def capture(model: Any, inputs: list[Any]) -> tuple[Any, list[Any]]:
    """Dynamo's graph of ``model`` on ``inputs`` (one graph: ``fullgraph``) and its inputs."""
    import torch

    found: list[tuple[Any, list[Any]]] = []

    def keep(gm: Any, example_inputs: list[Any]) -> Any:
        found.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(model, backend=keep, fullgraph=True, dynamic=False)(*inputs)
    except Exception as exc:
        raise UserError(
            f"torch.compile could not capture the model as one graph ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}): accelopt model needs a model "
            "Dynamo traces without graph breaks"
        ) from None
    return found[0]
