"""The run-time guard: every torch operator a launcher runs outside its Triton kernels.

The static checks refuse torch operators by name; this sees them whatever the spelling (``x * 2``
on a tensor, a slice assignment): while the launcher runs, a torch dispatch mode records each
operator that reaches a tensor. Allocation and views are allowed; anything else means the work
happened outside the kernel, and the evaluation is ``REJECTED``. In Triton's CPU interpreter the
interpreter itself moves data with torch operators: those, made by Triton's own code, are not the
kernel's; nor are Triton's own operators on a GPU (autotuning clears the L2 cache and restores
buffers between configurations). Who made an operator is the nearest frame outside torch: a
heuristic's lambda or an autotune hook that Triton calls is the kernel's own code, and refused. A
kernel cannot call into Triton's internals: the static checks allow only its public names.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

ALLOWED_OPS = frozenset(
    {
        "aten.empty.memory_format",
        "aten.empty_strided.default",
        "aten.empty_like.default",
        "aten.view.default",
        "aten.alias.default",
        "aten._unsafe_view.default",
    }
)


@cache
def _package_dirs() -> tuple[str, str]:
    """torch's and triton's folders (a guard is made per call: looked up once)."""
    import torch
    import triton

    torch_dir, triton_dir = (str(Path(m.__file__).parent) + "/" for m in (torch, triton))
    return torch_dir, triton_dir


class TorchOpGuard(TorchDispatchMode):
    """Records (and refuses) the torch operators run while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []
        self._torch_dir, self._triton_dir = _package_dirs()

    def _from_triton(self) -> bool:
        """Whether the nearest frame outside torch (and this module) is Triton's own code."""
        frame = sys._getframe(1)
        while frame is not None and (
            frame.f_code.co_filename.startswith(self._torch_dir)
            or frame.f_code.co_filename == __file__
        ):
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename.startswith(self._triton_dir)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = str(func)
        if name not in ALLOWED_OPS and not self._from_triton():
            self.refused.append(name)
            raise RuntimeError(f"the launcher ran torch operator {name} outside its Triton kernels")
        return func(*args, **(kwargs or {}))


def refused_message(refused: list[str]) -> str:
    ops = ", ".join(dict.fromkeys(refused))
    return (
        f"the launcher ran torch operators outside its Triton kernels ({ops}): only allocation "
        "(torch.empty) is allowed there; the work must happen in @triton.jit kernels"
    )
