"""``accelopt serve``: the measurement as an HTTP API for other tools."""
