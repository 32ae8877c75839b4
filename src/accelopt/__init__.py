"""accelopt: LLM agents that make compute kernels faster, measured against the roofline."""

__version__ = "0.1.0"
