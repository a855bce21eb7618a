"""Sphinx extensions of the nlicl book, loaded from ``_config.yml`` (``sphinx.extra_extensions``).

Only the book build imports them (they need Sphinx); the library never does.
"""
