"""The timing options the command-line tests give ``optimize`` (and ``eval``): what a search
decides is the same on two seeds and five timed calls, in a tenth of the time."""

QUICK_TIMING = ("--seeds", "2", "--min-calls", "5", "--min-time", "0.02")
# optimize runs whose test is not about the references (NumPy, PyTorch) skip timing them
NO_REFERENCES = ("--no-references",)
