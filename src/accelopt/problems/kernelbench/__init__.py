"""Import KernelBench files (``class Model``, ``get_inputs()``, ``get_init_inputs()``) as
workspace problems: the reference is the PyTorch model run in float64, the cost model is counted.

Importing this package does not import torch; importing a file, and the reference and the input
generator of an imported problem, do. Its modules import each other by their full names, never
through this package.
"""

from accelopt.problems.kernelbench.imported import load_imported
from accelopt.problems.kernelbench.importer import Imported, import_dir, import_file
from accelopt.problems.kernelbench.source import ImportRefused, default_name

__all__ = [
    "ImportRefused",
    "Imported",
    "default_name",
    "import_dir",
    "import_file",
    "load_imported",
]
