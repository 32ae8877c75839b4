"""Export any problem (with a kernel and its evaluations) as a FlashInfer Trace dataset:
``export.export_problem``; ``traces``: a kernel as a solution, its evaluations as traces.

Importing a dataset is ``accelopt.problems.flashinfer``'s. This package imports none of its
modules: import them by their full names.
"""
