"""The synchronous face of the store: :class:`SyncHistoryStore`.

``store.py`` is generated from the contract by ``generate.py``
(``python -m store.sync.generate``); ``loop.py`` is the private event-loop thread it
runs the async store on.
"""

from store.sync.store import SyncHistoryStore

__all__ = ["SyncHistoryStore"]
