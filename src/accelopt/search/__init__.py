"""The search: a run's loop (``loop.Optimizer``) driving the agents and the profiler, each iteration
as its strategy (``strategies``: beam search, repeated sampling, autotune) says."""
