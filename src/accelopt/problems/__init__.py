"""The benchmark suite: problem records, the loader, and one folder per problem."""

from accelopt.problems.loader import UnknownProblemError, list_problems, load_problem
from accelopt.problems.records import Cost, CostModel, Problem, TensorSpec, Workload

__all__ = [
    "Cost",
    "CostModel",
    "Problem",
    "TensorSpec",
    "UnknownProblemError",
    "Workload",
    "list_problems",
    "load_problem",
]
