"""Right at the first launch, then never returns."""

import triton
import triton.language as tl


@triton.jit
def _silu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x / (1.0 + tl.exp(-x)), mask=mask)


_calls = []


def kernel(x, y):
    _calls.append(1)
    while len(_calls) > 1:
        pass
    _silu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
