"""Import FlashInfer Trace datasets (definitions/, workloads/) as workspace problems. Exporting
a problem (with a kernel and its evaluations) as a dataset is ``accelopt.interop.flashinfer``'s.

The reference of an imported problem is the definition's PyTorch ``run()``, run in float64 on the
CPU; its cost model is counted. Importing this package does not import torch. Its modules import
each other by their full names, never through this package.
"""

from accelopt.problems.flashinfer.imported import load_imported
from accelopt.problems.flashinfer.importer import Imported, import_dataset, problem_name
from accelopt.problems.imports import ImportRefused

__all__ = [
    "ImportRefused",
    "Imported",
    "import_dataset",
    "load_imported",
    "problem_name",
]
