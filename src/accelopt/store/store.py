"""The store: one SQLite database per workspace (``<workspace>/accelopt.db``).

Runs, the kernels each run saw (sources kept once per hash), the evaluation cache, every LLM call,
the state after each iteration, and the optimization memory with a full-text index. Each group of
tables has its own module and class, and ``Store`` is all of them over one connection:

- ``runs.RunTables``: runs and their iterations (``commit_iteration``: record, experiences and
  best in one transaction);
- ``kernels.KernelTables``: the kernels of each run, the evaluation cache, the re-timings;
- ``calls.CallTables``: LLM calls and the holds of paid calls on their way (``StoreRecorder``);
- ``experiences.ExperienceTables``: the optimization memory and per-iteration retrievals;
- ``references.ReferenceTables``: the references (NumPy, PyTorch) each run timed;
- ``database.Database``: the connection, its lock and its transactions (durability and threads
  are explained there).

Structured fields without a natural column are kept as JSON: a run's spec (which the store never
reads: ``search.spec.RunSpec``), a kernel's plan steps, an iteration, and whole ``Evaluation`` and
``LLMCall`` models. The columns the queries need are kept beside the JSON.
"""

from __future__ import annotations

from accelopt.store.calls import CallTables
from accelopt.store.experiences import ExperienceTables
from accelopt.store.kernels import KernelTables
from accelopt.store.references import ReferenceTables
from accelopt.store.runs import RunTables


class Store(RunTables, KernelTables, CallTables, ExperienceTables, ReferenceTables):
    """Persistence for one workspace. Use ``Store.open(workspace)``; close it (or use ``with``)."""
