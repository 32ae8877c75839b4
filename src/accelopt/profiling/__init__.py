"""The profiling service: build, check and time kernels in isolated worker processes.

Three parts, one folder each (docs/architecture.md draws the path of one measurement):

- ``parent/``: this process's side. ``Evaluator`` (static checks, the worker pool, scoring against
  the roofline), the evaluation cache in front of it (``CachedProfiler``) and the local runner;
- ``worker/``: the other side of the process boundary. A worker isolates itself (``sandbox``),
  serves typed requests (``protocol``) and runs the harness (build, check, time) on untrusted code;
- ``cluster/``: scale-out. One device actor per device of a Ray cluster, each owning an
  ``Evaluator``.

What all three share sits here: ``config.EvalConfig``, the ``evaluation.Evaluation`` record, the
``profiler`` protocols (``Profiler``, ``Runner``, ``Job``, ``Measured``), ``factory.make_profiler``,
re-timing sessions (``session``) and the profile given to the agents (``profile``).

Nothing here imports anything heavy on purpose: a worker process starts from
``accelopt.profiling.worker`` and must isolate itself before NumPy starts any thread.
"""
