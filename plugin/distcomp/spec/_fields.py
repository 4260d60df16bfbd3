"""Schema pieces the three dialects share."""

from __future__ import annotations

from ._limits import MAX_NAME, NAME_WHY
from ._schema import NAME_RE, Anything, Int, ListOf, MapOf, Node, Null, Num, Obj, Scalar, Str, Union

COMPONENT_NAME = Str(
    "Component name: letters, digits, '.', '_' and '-', starting with a letter or digit.",
    pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", pattern_hint="letters, digits, '.', '_' or '-', starting with a letter or digit",
    what="name", max_length=MAX_NAME, length_hint=NAME_WHY,
)
VERSION = Union((Str(), Num()), "Component version, e.g. 1.0.0.", expected="a version string such as 1.0.0")
TEXT = Str()
TAGS = Union((MapOf(Union((Scalar(), Null()), expected="a string")), ListOf(Str())),
             "Free-form tags.", expected="a mapping of tags")
ENV_VARS = MapOf(Union((Scalar(), Null()), expected="a string"), "Environment variables every rank gets.",
                 key_pattern=NAME_RE, key_what="environment variable name")
COUNT = Int(minimum=1)

CONDA = Obj({
    "conda_dependencies": Anything("An inline conda environment (name, channels, dependencies)."),
    "conda_dependencies_file": Str("A conda environment file, relative to the spec."),
    "pip_requirements_file": Str("A pip requirements file, relative to the spec."),
}, description="Conda settings of the environment.")

ENVIRONMENT_OBJ = Obj({
    "name": Str("A named (registered) environment, e.g. AzureML-Minimal."),
    "version": VERSION,
    "label": Str(),
    "image": Str("A docker image, e.g. python:3.11-slim."),
    "docker": Obj({
        "image": Str("A docker image."),
        "base_dockerfile": Str(),
        "build": Anything(),
    }, description="Docker settings."),
    "conda": CONDA,
    "conda_file": Union((Str(), Anything()), expected="a path or an inline conda environment"),
    "os": Str(enum=("Linux", "Windows"), case_insensitive=True, what="os"),
    "os_type": Str(enum=("linux", "windows"), case_insensitive=True, what="os"),
    "build": Anything(),
    "description": Str(),
    "tags": TAGS,
    "python": Anything(),
}, description="The environment the command runs in.")

ENVIRONMENT = Union((Str(description="A reference such as azureml:AzureML-Minimal:1."), ENVIRONMENT_OBJ),
                    "The environment: a reference or a definition.", expected="a reference string or a mapping")

CODE = Union((Str(), Obj({"path": Str("The code folder, relative to the spec.")})),
             "The folder the command runs in, relative to the spec (default: the spec's folder).",
             expected="a folder path")


def ports(names: tuple[str, ...], extra: dict[str, Node], *, lists: bool = False) -> dict[str, Node]:
    """The type field of a port variant; ``lists``: also a list of them (the Component SDK's
    ``type: [AnyFile, AnyDirectory]``, a port that takes either)."""
    one = Str(enum=names, case_insensitive=True, what="port type")
    kind: Node = Union((one, ListOf(one)), expected="a port type or a list of port types") if lists else one
    return {"type": kind, **extra}
