"""Full-text search in SQL: the index (:mod:`~store.sql.search.index`) and the query
that finds a page of hits in it (:mod:`~store.sql.search.find`)."""
