"""The component registry: distributed components shared by ``name@version``, without a cloud.

>>> from distcomp.registry import locate, open_registry
>>> open_registry("/shared/registry").publish("components/pytorch-ddp-train")    # doctest: +SKIP
Published(name='pytorch-ddp-train', version='1.0.0', sha256='...', location='...', created=True)
>>> locate("pytorch-ddp-train@^1", "/shared/registry")                            # doctest: +SKIP
PosixPath('/shared/registry/pytorch-ddp-train/1.0.0/component.yaml')

Each ``distcomp registry`` action is one call returning a record: ``publish(*specs)``
(``PublishReport``), ``components()`` and ``search(text)`` (``Listing``), ``show(ref)``
(``VersionDetails``), ``deprecate(ref, message)`` (``Deprecation``).

A published version is immutable and stored with a content hash checked on every load. The
default store is a folder (``$DISTCOMP_REGISTRY``, else the user's data folder); a plugin
brings another through the ``distcomp_registry_stores`` hook.

Importing this package loads nothing: each name loads its module on first use, so the
plugin manager (which registers the built-in store) and ``distcomp validate`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import exports

if TYPE_CHECKING:
    from ._api import (
        Deprecation, Listing, PublishFailure, PublishReport, Skipped, VersionDetails, components, deprecate, publish,
        search, show,
    )
    from ._directory import DirectoryStore, directory_store
    from ._locate import default_location, locate, open_registry
    from ._manifest import Manifest
    from ._records import (
        DeprecatedComponentWarning, Published, Reference, RegistryError, Resolved, Summary, VersionInfo,
    )
    from ._reference import parse_reference
    from ._registry import Registry
    from ._store import RegistryStore
    from ._stored import inside_store, pycache_prefix, stored_code_env, stored_version
    from ._working import WorkingCopy, working_copy

_MODULES = {  # module: the names it provides
    "_api": ("Deprecation", "Listing", "PublishFailure", "PublishReport", "Skipped", "VersionDetails", "components",
             "deprecate", "publish", "search", "show"),
    "_directory": ("DirectoryStore", "directory_store"),
    "_locate": ("default_location", "locate", "open_registry"),
    "_manifest": ("Manifest",),
    "_records": ("DeprecatedComponentWarning", "Published", "Reference", "RegistryError", "Resolved", "Summary",
                 "VersionInfo"),
    "_reference": ("parse_reference",),
    "_registry": ("Registry",),
    "_store": ("RegistryStore",),
    "_stored": ("inside_store", "pycache_prefix", "stored_code_env", "stored_version"),
    "_working": ("WorkingCopy", "working_copy"),
}
__getattr__, __dir__ = exports(__name__, _MODULES, globals())

__all__ = [
    "DeprecatedComponentWarning", "Deprecation", "DirectoryStore", "Listing", "Manifest", "PublishFailure",
    "PublishReport", "Published", "Reference", "Registry", "RegistryError", "RegistryStore", "Resolved", "Skipped",
    "Summary", "VersionDetails", "VersionInfo", "WorkingCopy", "components", "default_location", "deprecate",
    "directory_store", "inside_store", "locate", "open_registry", "parse_reference", "publish", "pycache_prefix",
    "search", "show", "stored_code_env", "stored_version", "working_copy",
]

