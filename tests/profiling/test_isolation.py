"""The network a worker gets here, probed as a worker starts (``accelopt hardware`` shows it)."""

from accelopt.profiling.isolation import worker_network


def test_worker_network_is_none_exactly_where_unshare_is_permitted(unshare_permitted: bool):
    assert worker_network() == ("none" if unshare_permitted else "host")
