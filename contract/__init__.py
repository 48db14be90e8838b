"""What the compiler and the deployment runtime both speak, importing neither: copied into a build's OUT/deploy/.

`ming_host` holds the host numerics (quantizing the input, the float tail after the accelerator) and the bus
layout of an image; `accelerator_schema` describes accelerator.json (and host.json, its host part), which the
compiler writes and the driver reads; `ming_ports` reads its ports; `ming_json` reads JSON files within
bounds; `ming_npy` reads the user's input file and writes the output files; `ming_cxx` compiles the
C-simulation with g++ and stamps the binary; `ming_errors` holds the one error of this side. They need only
numpy, Python 3.10 or newer (PYNQ 3.0's Python), and each imports the others flat where it runs beside them
on the board.
"""
