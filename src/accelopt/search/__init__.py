"""The search: beam search and repeated sampling, driving the agents and the profiler."""
