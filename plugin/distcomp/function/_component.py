"""``@distcomp.component``: a typed Python function as a distributed component.

Decorating checks what is cheap and final (the function can be imported by name, every
annotation is a component type) and computes nothing else: the spec is made on first use, so
importing a module of components (as each rank does) costs no spec loading."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, overload

from ._origin import Origin, locate
from ._signature import FunctionError, Param, parameters
from ._text import Settings, spec_text

if TYPE_CHECKING:
    from ..spec import ComponentSpec

__all__ = ["DEFAULTS", "FunctionComponent", "component", "settings_of"]

_COMPONENT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class FunctionComponent:
    """A function made a component by ``@distcomp.component``.

    Calling it runs the plain function once, in this process (for unit tests). Everywhere a
    spec is accepted (``distcomp.run``, ``compile``, ``submit``, ``render``, ``load``...) it
    stands for its spec. What a target needs:

    - ``spec``: the ComponentSpec (loaded from ``spec_text()`` by the normal loader; its
      ``code`` is the code folder, ``source`` None: nothing is written). ``distcomp.load``
      and the targets' loaders give the same spec read from a file (``_filed``: in the
      user's cache, its ``code:`` this code folder), so a target that reads, embeds or ships
      the spec file takes a function's as any other;
    - ``code``: the code folder that travels (``origin``: module, qualified name, file);
    - ``spec_text(code)``: the DistributedComponent YAML, with ``code:`` as given;
    - ``distcomp.export(self, folder)``: ``folder/component.yaml`` and ``folder/code/``, for a
      target or a user that needs files."""

    fn: Callable[..., Any]
    origin: Origin
    params: tuple[Param, ...]
    settings: Settings

    def __init__(self, fn: Callable[..., Any] | None, settings: Settings, origin: Origin, params: tuple[Param, ...],
                 doc: str | None = None, load: Callable[[], Callable[..., Any]] | None = None):
        """``fn`` None: read from its file without importing it (``_static``): ``load`` imports
        it, on first use of ``fn`` (a call); ``doc`` is its docstring meanwhile."""
        self.__dict__.update(settings=settings, origin=origin, params=params)
        if fn is None:
            name = origin.qualname.rpartition(".")[2]
            self.__dict__.update(__module__=origin.module, __name__=name, __qualname__=origin.qualname, __doc__=doc,
                                 _load=load)
        else:
            self._bind(fn)

    def _bind(self, fn: Callable[..., Any]) -> None:
        self.__dict__.update(fn=fn, __wrapped__=fn)
        for name in functools.WRAPPER_ASSIGNMENTS:  # it reads as the function: name, docstring, signature
            if hasattr(fn, name):
                self.__dict__[name] = getattr(fn, name)

    def __getattr__(self, name: str) -> Any:
        # only reached for a component read without importing its module: import it now
        load = self.__dict__.get("_load")
        if name not in ("fn", "__wrapped__") or load is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._bind(load())
        return self.__dict__[name]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a FunctionComponent is read-only (setting {name!r})")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The plain function, once, in this process."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionComponent {self.ref} ({self.origin.target} in {self.code})>"

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.settings.version}" if self.settings.version else self.name

    @property
    def code(self) -> Path:
        """The code folder: what travels to every rank, the folder the rank runs in."""
        return self.origin.root

    def spec_text(self, code: str = ".") -> str:
        """The spec as DistributedComponent YAML, its ``code:`` being ``code`` (relative to the
        file's folder); ``export`` writes it with ``code: code``."""
        return spec_text(self.settings, self.params, self.origin.target, code, self.origin.path, self.origin.source)

    @property
    def spec(self) -> "ComponentSpec":
        """The ComponentSpec, loaded from ``spec_text()`` against the code folder (made once)."""
        cached = self.__dict__.get("_spec")
        if cached is None:
            from ..spec import SpecError, loads

            try:
                cached = loads(self.spec_text(), f"{self.origin.file}:{self.origin.qualname}", self.code)
            except SpecError as exc:  # a setting the decorator passed on (a launcher name, a version...)
                raise FunctionError(f"{self.origin.file}:{self.origin.qualname}: {exc}".replace("\n", "; ")) from None
            self.__dict__["_spec"] = cached
        return cached


# the decorator's keyword defaults (the static reading of a file starts from them; a test holds
# them equal to component()'s signature)
DEFAULTS: Mapping[str, Any] = MappingProxyType(dict(
    name=None, version=None, launcher="torch.distributed", nodes=1, nproc_per_node=1, image=None, packages=(), env=None,
    description=None, code=None, max_restarts=0))


@overload
def component(fn: Callable[..., Any], /) -> FunctionComponent: ...
@overload
def component(*, name: str | None = None, version: str | None = None, launcher: str = "torch.distributed",
              nodes: int = 1, nproc_per_node: int = 1, image: str | None = None, packages: Iterable[str] = (),
              env: Mapping[str, str] | None = None, description: str | None = None,
              code: "str | os.PathLike[str] | None" = None,
              max_restarts: int = 0) -> Callable[[Callable[..., Any]], FunctionComponent]: ...


def component(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, version: str | None = None,
              launcher: str = "torch.distributed", nodes: int = 1, nproc_per_node: int = 1, image: str | None = None,
              packages: Iterable[str] = (), env: Mapping[str, str] | None = None, description: str | None = None,
              code: "str | os.PathLike[str] | None" = None, max_restarts: int = 0) -> Any:
    """Make a typed function a distributed component (``@distcomp.component(...)`` or bare
    ``@distcomp.component``).

    ``name``: the component's (default: the function's, ``_`` -> ``-``); ``version``;
    ``launcher``: how the ranks start (``torch.distributed``, ``mpi``, ``tensorflow.distributed``,
    ``deepspeed`` or a plugin's); ``nodes`` and ``nproc_per_node``: the default layout (a run or
    compile may override them); ``image``: the container image targets run it in;
    ``packages``: pip requirements; ``env``: variables every rank gets; ``description``
    (default: the docstring's first line); ``code``: the folder that travels (default: the
    module's folder, or its package's root); ``max_restarts``: how many times a failed job starts
    again, every rank on every node (the spec's ``launcher.max_restarts``; ``--max-restarts``
    overrides it).

    The function runs on every rank with each value converted back to its annotated type
    (see ``distcomp.function``); it is imported there by module and qualified name."""
    settings: dict[str, Any] = dict(name=name, version=version, launcher=launcher, nodes=nodes,
                                    nproc_per_node=nproc_per_node, image=image, packages=packages, env=env,
                                    description=description, code=code, max_restarts=max_restarts)
    if fn is not None:
        return _make(fn, **settings)
    return lambda f: _make(f, **settings)


def _make(fn: Callable[..., Any], *, code: "str | os.PathLike[str] | None", **given: Any) -> FunctionComponent:
    if isinstance(fn, FunctionComponent):
        raise FunctionError(f"{fn.origin.target} is a component already: decorate it once")
    where = f"@distcomp.component {getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    origin = locate(fn, code, where)
    where = f"@distcomp.component {origin.file.name}:{origin.qualname}"
    params = parameters(fn, where)
    return FunctionComponent(fn, settings_of(fn.__name__, fn.__doc__, where, **given), origin, params)


def settings_of(fn_name: str, doc: str | None, where: str, *, name: str | None, version: str | None, launcher: str,
                nodes: int, nproc_per_node: int, image: str | None, packages: Iterable[str],
                env: Mapping[str, str] | None, description: str | None, max_restarts: int = 0) -> Settings:
    """The decorator's settings, checked (``fn_name`` and ``doc``: the function's name and
    docstring, for the defaults); shared by the decorator and the static reading of a file."""
    final = name if name is not None else fn_name.replace("_", "-")
    if not isinstance(final, str) or not final or not final[0].isalnum() or not set(final) <= _COMPONENT_NAME_CHARS:
        raise FunctionError(f"{where}: name {final!r}: use letters, digits, '.', '_' or '-', starting with a letter "
                            "or digit")
    for what, count in (("nodes", nodes), ("nproc_per_node", nproc_per_node)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FunctionError(f"{where}: {what} must be an integer >= 1 (got {count!r})")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise FunctionError(f"{where}: max_restarts must be an integer >= 0 (got {max_restarts!r})")
    if not isinstance(launcher, str) or not launcher.strip():
        raise FunctionError(f"{where}: launcher must be a launcher's name such as 'torch.distributed' or 'mpi'")
    if isinstance(packages, str):
        raise FunctionError(f"{where}: packages takes a list of requirements, e.g. packages=[{packages!r}]")
    variables = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not isinstance(value, (str, int, float, bool)):
            raise FunctionError(f"{where}: env takes NAME: text pairs (got {key!r}: {value!r})")
        variables[key] = str(value)
    lines = (doc or "").strip().splitlines()
    return Settings(final, None if version is None else str(version), launcher.strip(), nodes, nproc_per_node,
                    image, tuple(str(p) for p in packages), MappingProxyType(variables),
                    description if description is not None else (lines[0].strip() if lines else None), max_restarts)
