"""What runs beside the accelerator, on the board or here: copied verbatim into a build's OUT/deploy/.

`ming_host` holds the host side of the numeric contract (quantizing the input, the float tail after the
accelerator) and the bus layout of an image; `ming_driver` moves batches through an accelerator (PYNQ and
an AXI DMA, XRT and the data-mover kernels, or the C-simulation); `run` is the command line. They need
only numpy (and PYNQ or pyxrt on the board), Python 3.10 or newer: PYNQ 3.0's Python.
"""
