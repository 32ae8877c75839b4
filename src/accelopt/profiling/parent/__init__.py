"""The parent side of a measurement: the ``Evaluator`` (static checks, then the worker pool, then
scoring against the roofline), the deadlines the pool applies, the evaluation cache and the local
runner. Nothing here runs kernel code."""
