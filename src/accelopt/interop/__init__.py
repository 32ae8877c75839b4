"""Other tools' formats for what accelopt measured: problems, kernels and their evaluations written
out for them (``flashinfer``: FlashInfer Trace datasets).

This package sits above the records it writes (problems, backends' kernels, hardware ceilings,
profiling's evaluations); reading another format's problems in is the problems package's
(``problems.kernelbench``, ``problems.flashinfer``).
"""
