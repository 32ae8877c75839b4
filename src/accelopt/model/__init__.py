"""The model path: a user's ``nn.Module`` made faster end to end with the kernels accelopt found.

``backend.py`` is the ``torch.compile`` backend (Dynamo's FX graph in; matched subgraphs swapped
for exported kernels, the rest to Inductor); ``matching.py`` finds the subgraphs that compute a
known problem; ``sites.py`` calls a kernel in place of one and falls back to the subgraph;
``session.py`` times eager, Inductor and accelopt interleaved; ``report.py`` writes the HTML.
torch is imported inside these modules only: ``import accelopt`` never pays for it.
"""
