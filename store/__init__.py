"""chatledger's persistence and integrations: the SQL store, formats, importers, CLI."""

__all__: list[str] = []
