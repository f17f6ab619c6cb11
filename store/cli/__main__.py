"""``python -m store.cli``: the same as the ``chatledger`` command."""

from store.cli import main

main()
