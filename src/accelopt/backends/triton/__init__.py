"""The ``triton`` backend: Python modules of ``@triton.jit`` kernels, run on an NVIDIA GPU
(or checked, untimed, in Triton's CPU interpreter with ``TRITON_INTERPRET=1``)."""
