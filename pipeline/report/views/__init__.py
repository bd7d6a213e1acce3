"""The report's views, one module per dashboard: each a function ``(fetch) -> Section | None``
(``None`` when its data streams hold nothing in range). :mod:`~pipeline.report.views.base` holds
what they share: the search, documents as tables, the figure style and :class:`Section`."""
