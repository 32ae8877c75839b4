"""ATTACK_DOC

The kernel computes silu right, so that nothing but its harm can keep it from passing. WHEN says
whether the harm runs at import time or inside the launcher's call.
"""

import triton
import triton.language as tl

WHEN = "@WHEN@"


@triton.jit
def _silu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x / (1.0 + tl.exp(-x)), mask=mask)


def _harm():
    pass  # HARM


if WHEN == "import":
    _harm()


def kernel(x, y):
    if WHEN == "call":
        _harm()
    n = x.numel()
    _silu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
