"""Scale-out: the ``ray`` profiler. One device actor per device of a Ray cluster, each owning an
``Evaluator`` (``parent/``) with its own isolated worker pool; imported only when ``--profiler ray``
is asked for (Ray is an optional extra).

``runner.py`` holds the entry (``RayRunner``, ``RayOptions``); ``fleet.py`` the Ray side (the
device actors, the connection to Ray); ``dispatcher.py`` the scheduling and retries, without Ray.
"""
