"""Backend ``cpu``: C11 kernels with OpenMP, compiled by the system C compiler."""
