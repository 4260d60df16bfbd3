"""``distcomp registry publish|list|show|search|deprecate``: each action one call of
``distcomp.registry``, its record printed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ._common import EXIT_OK

if TYPE_CHECKING:
    from typing import Sequence

    from ..registry._api import Listing, PublishResult


def _err(message: str) -> None:
    print(f"distcomp registry: {message}", file=sys.stderr)


def _published(result: "PublishResult") -> None:
    from ..registry import PublishFailure, Skipped

    if isinstance(result, Skipped):
        _err(f"note: skipped {result.path}: {result.reason}")
        return
    if isinstance(result, PublishFailure):
        _err(result.message)
        return
    for line in result.swept:
        _err(f"note: removed what an interrupted publish left in the registry's staging area: {line}")
    for stored, target in result.copied:
        _err(f"note: {result.name}@{result.version}: {stored} is stored as a copy of {target} (a symbolic link "
             "outside the code folder, allowed by --allow-external-links)")
    if result.created:
        print(f"published {result.name}@{result.version} (sha256 {result.sha256[:12]})")
    else:
        print(f"{result.name}@{result.version} already published (same content)")


def _table(listing: "Listing", as_json: bool, searched: bool) -> None:
    if as_json:
        print(json.dumps(listing.as_json(), indent=2))
        return
    if not listing.components:
        _err(f"nothing in the registry at {listing.location} matches {listing.query!r}" if searched else
             f"the registry at {listing.location} is empty; publish with `distcomp registry publish SPEC`")
    items = listing.components
    width = max([len(s.name) for s in items] + [4])
    vwidth = max([len(s.version) for s in items] + [6])
    for s in items:
        count = f"{s.versions} version{'s' * (s.versions != 1)}"
        count += f", {s.deprecated} deprecated" if s.deprecated else ""
        print(f"{s.name:<{width}}  {s.version:<{vwidth}}  {count:<26}  {s.display_name or s.description[:60]}")


def _input(name: str, info: Any) -> str:
    if not isinstance(info, dict):
        return name
    extra = "optional" if info.get("optional") else None
    if info.get("default") is not None:
        extra = f"default {info['default']}"
    return f"{name} ({info.get('type')}{', ' + extra if extra else ''})"


def _show(args: argparse.Namespace) -> int:
    from ..registry import show

    shown = show(args.ref, registry=args.registry)
    if args.json:
        print(json.dumps(shown.as_json(), indent=2))
        return EXIT_OK
    about = shown.about
    print(shown.ref + (f"  {about['display_name']}" if about.get("display_name") else ""))
    if shown.deprecated:
        print(f"  DEPRECATED: {shown.deprecated}")
    if about.get("description"):
        print(f"  {about['description']}")
    print(f"  launcher: {about.get('launcher')}, {about.get('nodes')} node(s) x "
          f"{about.get('processes_per_node') or 1} process(es)")
    raw_inputs, raw_outputs = about.get("inputs"), about.get("outputs")
    inputs = raw_inputs if isinstance(raw_inputs, dict) else {}
    outputs = raw_outputs if isinstance(raw_outputs, dict) else {}
    print(f"  inputs: {', '.join(_input(n, i) for n, i in inputs.items()) or '-'}")
    print(f"  outputs: {', '.join(_input(n, o) for n, o in outputs.items()) or '-'}")
    print(f"  sha256: {shown.sha256} ({shown.files} files, verified)")
    print(f"  published: {shown.published} by {shown.user}")
    print(f"  stored: {shown.spec}")
    versions = shown.versions
    listed = [v.version + (" (deprecated)" if v.deprecated is not None else "") for v in versions[-20:]]
    print(f"  versions: {', '.join(listed)}" + (f" ({len(versions) - 20} older)" if len(versions) > 20 else ""))
    return EXIT_OK


def cmd_registry(args: argparse.Namespace) -> int:
    """``distcomp registry publish|list|show|search|deprecate`` (see ``distcomp.registry``); its
    RegistryError is a usage error (exit 2)."""
    from .. import registry

    action = args.registry_command
    if action == "publish":
        return registry.publish(*args.specs, registry=args.registry, allow_external_links=args.allow_external_links,
                                progress=_published).exit_code
    if action in ("list", "search"):
        searched = action == "search"
        _table(registry.components(args.text if searched else "", registry=args.registry), args.json, searched)
        return EXIT_OK
    if action == "show":
        return _show(args)
    done = registry.deprecate(args.ref, args.message or "", undo=args.undo, registry=args.registry)
    if done.undo:
        print(f"{done.ref} is no longer deprecated" if done.changed else f"{done.ref} was not deprecated")
    else:
        print(f"deprecated {done.ref}" + (f": {done.message}" if done.message else ""))
    return EXIT_OK


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", argv: "Sequence[str]" = ()) -> None:
    p = sub.add_parser("registry", help="publish components as name@version, find them, deprecate them",
                       description="The component registry: publish a spec and its code as NAME@VERSION "
                                   "(immutable, content-hashed); find it again as NAME@VERSION, NAME@latest or a "
                                   "range (NAME@^1.2, 'NAME@>=1.0,<2'), which every command taking a SPEC accepts.")
    actions = p.add_subparsers(dest="registry_command", metavar="ACTION")
    actions.required = True
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--registry", metavar="LOCATION", help="a folder (local or shared), or SCHEME://... of a "
                       "store plugin (default: $DISTCOMP_REGISTRY, else ~/.local/share/distcomp/registry)")
    q = actions.add_parser("publish", parents=[where], help="store specs and their code folders")
    q.add_argument("specs", nargs="+", metavar="SPEC", help="a component.yaml, a folder holding one, or a "
                   "Python-function component as FILE.py:FUNCTION (stored as `distcomp.export` writes it)")
    q.add_argument("--allow-external-links", action="store_true", help="store a copy of the file a symbolic link "
                   "in the code folder leads to outside it (refused by default)")
    for action, help_text in (("list", "every component: latest version, version count"),
                              ("search", "components whose name, title, description or tags contain TEXT"),
                              ("show", "one version: inputs, outputs, hash, where it is stored, other versions")):
        q = actions.add_parser(action, parents=[where], help=help_text)
        if action == "search":
            q.add_argument("text", metavar="TEXT")
        if action == "show":
            q.add_argument("ref", metavar="NAME[@VERSION]", help="NAME (its latest), NAME@1.2.0, NAME@^1.2, ...")
        q.add_argument("--json", action="store_true", help="print JSON")
    q = actions.add_parser("deprecate", parents=[where], help="mark a version deprecated: latest and ranges skip it")
    q.add_argument("ref", metavar="NAME@VERSION")
    q.add_argument("--message", "-m", metavar="TEXT", help="why, and what to use instead")
    q.add_argument("--undo", action="store_true", help="remove the deprecation")
    p.set_defaults(func=cmd_registry)
