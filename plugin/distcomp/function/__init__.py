"""Python-function components: a typed function becomes the same ComponentSpec a YAML file gives.

>>> import distcomp
>>> @distcomp.component(name="ddp-train", nproc_per_node=2)            # doctest: +SKIP
... def train(data: distcomp.Input, model: distcomp.Output, epochs: int = 3, lr: float = 0.01):
...     ...                                      # runs on every rank; distcomp.runtime works inside
>>> distcomp.run(train, inputs={"data": "d/", "epochs": 2})           # doctest: +SKIP
>>> distcomp.export(train, "exported/")   # component.yaml + code/, for a YAML or Azure ML user # doctest: +SKIP

The modules, one job each:

- ``_ports``: ``Input`` / ``Output``, the path annotations;
- ``_signature``: the function's parameters (``Param`` records) from its annotations;
- ``_origin``: where it lives (module, qualified name, code folder) and the refusals;
- ``_text``: the DistributedComponent YAML text of a component (what ``export`` writes);
- ``_component``: ``@component`` and ``FunctionComponent`` (``.spec``, ``.spec_text()``);
- ``_export``: ``export`` (the spec file and a copy of the code folder, written atomically);
- ``_filed``: the spec in a file of the user's cache, its code folder the project (what
  ``distcomp.load`` and every target's loader give);
- ``_reference``: ``FILE.py:FUNCTION`` references, as the CLI takes them;
- ``run``: the runner each rank executes (``python -m distcomp.function.run MODULE:QUALNAME ...``).

Names load on first use, so that ``import distcomp`` and the rank's runner stay fast.
"""

from __future__ import annotations

from ..base.lazy import exports

__all__ = ["FunctionComponent", "FunctionError", "Input", "Output", "Param", "component", "export", "is_reference",
           "load_reference"]

__getattr__, __dir__ = exports(__name__, {
    "_component": ("FunctionComponent", "component"),
    "_ports": ("Input", "Output"),
    "_signature": ("FunctionError", "Param"),
    "_export": ("export",),
    "_reference": ("is_reference", "load_reference"),
}, globals())
