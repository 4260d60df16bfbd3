"""The plugin contract, where a plugin author imports it: ``from distcomp.hookspec import
hookimpl``. It lives in the core (``distcomp.core.hookspec``)."""

from .core.hookspec import PROJECT, DistcompSpecs, hookimpl, hookspec

__all__ = ["DistcompSpecs", "PROJECT", "hookimpl", "hookspec"]
