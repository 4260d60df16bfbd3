"""Where the spec layer asks for launcher names without importing the plugin manager above it.

The plugin manager is the one source of truth for launcher names and aliases, but it sits above
the spec layer (it loads the launchers, which read specs). So the package's ``__init__`` hands
the two lookups in here, and ``distcomp.spec`` calls them on use. The built-in launchers' own
names are kept here (each takes its aliases from ``BUILTIN``), so that a spec's launcher
resolves without loading pluggy and the launchers (~25 ms) while no plugin is installed. Stdlib
only: it must stay below everything."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every process that imports this (an mpirun shim's too) ~10 ms; mypy reads True
if TYPE_CHECKING:
    from typing import Callable, Mapping

    Table = Callable[[], Mapping[str, str]]

GROUP = "distcomp"  # the plugins' entry-point group and pluggy project (core.hookspec.PROJECT)

# each built-in launcher's canonical name -> its aliases (distcomp.launchers.*: LauncherType(aliases=BUILTIN[NAME]))
BUILTIN: dict[str, tuple[str, ...]] = {
    "torch.distributed": ("pytorch", "torch", "pytorch.distributed"),
    "mpi": ("horovod", "openmpi"),
    "tensorflow.distributed": ("tensorflow", "tf", "tf.distributed"),
    "deepspeed": (),
}

_sources: dict[str, Table] = {}


def provide(*, installed: Table, builtin: Table) -> None:
    """Set how to list every launcher name and alias (lowercased -> canonical name): with the
    installed plugins, and with the built-in launchers only."""
    _sources.update(installed=installed, builtin=builtin)


def table(which: str) -> Mapping[str, str]:
    """``installed`` or ``builtin``: the table from the lookup ``provide`` set."""
    return _sources[which]()


def builtin_table() -> Mapping[str, str]:
    """The built-in launchers' table, as the plugin manager builds it from their records."""
    from types import MappingProxyType

    return MappingProxyType({n: name for name, aliases in BUILTIN.items() for n in (name, *aliases)})
