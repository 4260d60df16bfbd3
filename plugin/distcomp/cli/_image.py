"""``distcomp build-context SPEC DIR``: a Docker build context for the component's image
(``distcomp.build_context``), what it wrote printed."""

from __future__ import annotations

import argparse
from typing import Sequence
import shlex

from ._common import EXIT_OK, SPEC_HELP, deprecated, rel, speaker


def cmd_build_context(args: argparse.Namespace) -> int:
    from ..api._image import build_context

    say = speaker("build-context")
    context = build_context(args.spec, args.dir, base_image=args.base_image, include_distcomp=not args.no_distcomp,
                            force=args.force, warn=deprecated)
    for note in context.notes:
        say(f"note: {note}")
    where = shlex.quote(rel(context.path))
    wheel = f"{context.wheel} ({context.wheel_source}), " if context.wheel else ""
    n = len(context.requirements)
    say(f"wrote {where}: Dockerfile (FROM {context.base_image}), {wheel}requirements.txt ({n} requirement"
        f"{'s' * (n != 1)}), code/ ({len(context.code_files)} file{'s' * (len(context.code_files) != 1)})")
    say(f"next: docker build -t REGISTRY/NAME:TAG {where} && docker push REGISTRY/NAME:TAG; then "
        f"distcomp compile {shlex.quote(args.spec)} --target kubeflow --image REGISTRY/NAME:TAG --code image")
    return EXIT_OK


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: "Sequence[str]" = ()) -> None:
    p = sub.add_parser("build-context", help="write a Docker build context (Dockerfile, distcomp's wheel, the "
                                             "requirements, the code) for the component's image",
                       description="Write DIR: a Dockerfile FROM the base image that pip-installs wheels/ (distcomp's "
                                   "own wheel: distcomp is on no package index) and requirements.txt (the conda "
                                   "file's pip: list and the code folder's requirements.txt), and copies the code "
                                   "folder to /opt/distcomp/code, its working folder. Build and push it, then "
                                   "compile with --target kubeflow --image REGISTRY/NAME:TAG --code image.")
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("dir", metavar="DIR", help="the folder to write (new or empty)")
    p.add_argument("--base-image", metavar="IMAGE",
                   help="the image to build on (default: the spec's environment image, else python:3.11-slim)")
    p.add_argument("--no-distcomp", action="store_true",
                   help="leave distcomp's wheel out (a Kubeflow job's training pods do not run distcomp; a KFP "
                        "step does)")
    p.add_argument("--force", action="store_true", help="replace what DIR holds")
    p.set_defaults(func=cmd_build_context)
