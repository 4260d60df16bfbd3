"""The image a one-node step runs in, from the CLI (the target contract): one that holds distcomp.

A lightweight KFP component installs its packages at the step's start (``packages_to_install``),
but distcomp is on no public package index (PyPI) to install that way, and kfp's default image
(``python:3.11``) has none: such a step would only fail in the cluster. So ``--image``, or the
spec's environment image, is the step's, and the compile says which; with neither it refuses.
``load_component`` from Python keeps kfp's default, for kfp.local's SubprocessRunner (which
runs in this environment) and for ``packages_to_install`` from the caller's own index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ._errors import KfpTargetError

if TYPE_CHECKING:
    from ...spec import ComponentSpec


def _images(spec: "ComponentSpec", options: Mapping[str, Any]) -> tuple[str | None, str | None] | None:
    """``(--image, the spec's image)`` of a one-node step; None for several nodes, whose image is
    checked where the training job is made (``_component._cluster_image``)."""
    if (options.get("nodes") or spec.distribution.nodes) != 1:
        return None
    return options.get("image") or None, spec.environment.image if spec.environment is not None else None


def check_step_image(spec: "ComponentSpec", options: Mapping[str, Any]) -> None:
    """KfpTargetError when a one-node step would run in an image with no distcomp."""
    from ... import __version__

    images = _images(spec, options)
    if images is not None and not any(images):
        raise KfpTargetError(
            f"{spec.ref}: the KFP step needs an image with distcomp {__version__} installed, and the spec's "
            "environment names none (kfp's default python:3.11 has none, and distcomp is on no public package "
            "index for the step to pip-install): give --image IMAGE with distcomp installed, or build one with "
            "`distcomp build-context`")


def step_image_note(spec: "ComponentSpec", options: Mapping[str, Any]) -> tuple[str, ...]:
    """The note saying which image a one-node step runs in (none when it has none: refused)."""
    from ... import __version__

    images = _images(spec, options)
    if images is None or not any(images):
        return ()
    given, own = images
    where = f"{given} (--image)" if given else f"{own} (the spec's environment image; --image picks another)"
    return (f"the step runs in {where} and installs nothing: the image must hold distcomp {__version__} and "
            "what the command needs",)
