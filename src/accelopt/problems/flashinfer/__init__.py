"""Import FlashInfer Trace datasets (definitions/, workloads/) as workspace problems, and export
any problem (with a kernel and its evaluations) as a FlashInfer Trace dataset.

The reference of an imported problem is the definition's PyTorch ``run()``, run in float64 on the
CPU; its cost model is counted. Importing this package does not import torch.
"""

from accelopt.problems.flashinfer.export import ExportRefused, export_problem
from accelopt.problems.flashinfer.imported import load_imported
from accelopt.problems.flashinfer.importer import Imported, import_dataset, problem_name
from accelopt.problems.imports import ImportRefused

__all__ = [
    "ExportRefused",
    "ImportRefused",
    "Imported",
    "export_problem",
    "import_dataset",
    "load_imported",
    "problem_name",
]
