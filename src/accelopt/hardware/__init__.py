"""Device ceilings and the roofline: published specs for accelerators, measured ones for CPUs."""

from accelopt.hardware.cache import load_cpu_spec, measure_and_cache, save_cpu_spec
from accelopt.hardware.cpu_spec import measure_cpu
from accelopt.hardware.datasheet import DATASHEET, datasheet_spec
from accelopt.hardware.roofline import (
    SUSPICIOUS_FRACTION,
    Roofline,
    is_suspicious,
    pct_of_peak,
    roofline,
)
from accelopt.hardware.spec import HardwareSpec

__all__ = [
    "DATASHEET",
    "SUSPICIOUS_FRACTION",
    "HardwareSpec",
    "Roofline",
    "datasheet_spec",
    "is_suspicious",
    "load_cpu_spec",
    "measure_and_cache",
    "measure_cpu",
    "pct_of_peak",
    "roofline",
    "save_cpu_spec",
]
