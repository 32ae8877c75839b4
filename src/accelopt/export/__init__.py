"""Export a kernel that passed as a library: a folder with its source, objects, a C header, a
Python module (``accelopt.load``), EVIDENCE.json and a README (``accelopt export``)."""
