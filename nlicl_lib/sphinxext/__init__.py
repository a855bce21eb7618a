"""Sphinx extensions of the nlicl book, loaded from ``_config.yml`` (``sphinx.extra_extensions``)."""
