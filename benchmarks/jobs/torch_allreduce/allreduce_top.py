"""allreduce_fn.py's function with torch imported at the module's top, as a script has it:
`distcomp run allreduce_top.py:allreduce` imports the module to read the signature, so the
launcher imports torch too (benchmarks/launch.py's fntop row)."""
import torch  # noqa: F401  (at the top on purpose: what this variant measures)

import distcomp
from allreduce_fn import allreduce as plain


@distcomp.component(name="bench-torch-allreduce", version="0.1.0", nproc_per_node=2)
def allreduce() -> None:
    """One gloo all-reduce over 2 ranks; raises if the sum is wrong."""
    plain()  # a component called directly runs its plain function
