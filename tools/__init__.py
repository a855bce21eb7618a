"""The build's command-line tools (a package so that tests import them by name)."""
