"""The worker side of a measurement: a process that isolates itself (``sandbox``), then serves the
parent's typed requests (``protocol``) one at a time (``serve``), running the harness (``harness``:
build, check, time) on untrusted kernel code.

Started by the pool as ``python -m accelopt.profiling.worker FD [LOCK]`` (``__main__``). This
``__init__`` imports nothing: the worker isolates itself before NumPy starts any thread.
"""
