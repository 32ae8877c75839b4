"""Persistence: one SQLite database (WAL) per workspace for runs, kernels, evaluations, LLM calls
and the optimization memory. Every step is committed as it happens."""
