"""The ``torch`` and ``inductor`` kernel kinds: a problem's PyTorch form (``backend.py``)."""
