"""Backend ``numpy``: a problem's own reference in float32, the library a user would call."""
