"""``python -m accelopt``: the same as the ``accelopt`` command."""

from accelopt.cli.app import main

main()
