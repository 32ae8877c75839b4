"""The profiling service: build, check and time kernels in isolated worker processes.

This package's ``__init__`` imports nothing heavy on purpose: a worker process starts from
``accelopt.profiling.worker`` and must isolate itself before NumPy starts any thread. Import from
the modules: ``accelopt.profiling.service.Evaluator``, ``accelopt.profiling.config.EvalConfig``.
"""
