"""ming: int8 CNNs to streaming dataflow HLS accelerators for AMD FPGAs."""

__version__ = "0.1.0"
