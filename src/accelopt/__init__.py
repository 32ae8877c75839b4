"""accelopt: LLM agents that make compute kernels faster, measured against the roofline."""

__version__ = "0.1.0"


def load(folder: str) -> object:
    """The Python module of a folder written by ``accelopt export`` (see its README)."""
    from accelopt.export.loading import load as load_export

    return load_export(folder)
