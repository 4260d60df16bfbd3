"""``distcomp registry ACTION``: what each action prints (the parser is in ``distcomp.cli``)."""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path
from typing import Any

from ._locate import open_registry
from ._records import RegistryError, Summary
from ._reference import parse_reference
from ._registry import SPEC_NAMES, Registry

__all__ = ["run"]


def _err(message: str) -> None:
    print(f"distcomp registry: {message}", file=sys.stderr)


def _specs(given: list[str]) -> list[str]:
    """Spec files and component folders as given; a pattern the shell left alone (``'components/*'``)
    is expanded; files that are not YAML (a README beside the folders) are skipped with a note."""
    out: list[str] = []
    for item in given:
        matches = sorted(glob.glob(item)) if glob.has_magic(item) and not Path(item).exists() else [item]
        if not matches:
            raise RegistryError(f"{item}: matches no file or folder")
        for found in matches:
            path = Path(found)
            if path.is_file() and path.suffix.lower() not in (".yaml", ".yml"):
                _err(f"note: skipped {found}: not a spec file (.yaml) or a component folder")
            elif path.is_dir() and not any((path / n).is_file() for n in SPEC_NAMES):
                if len(matches) == 1:
                    raise RegistryError(f"{found}: no {SPEC_NAMES[0]} in this folder (give a component's folder or "
                                        "its spec file)")
                _err(f"note: skipped {found}: no {SPEC_NAMES[0]} in it")
            else:
                out.append(found)
    return out


def _publish(registry: Registry, args: argparse.Namespace) -> int:
    failed = 0
    for spec in _specs(args.specs):
        try:
            done = registry.publish(spec, args.allow_external_links)
        except RegistryError as exc:
            _err(str(exc))
            failed += 1
            continue
        for line in done.swept:
            _err(f"note: removed what an interrupted publish left in the registry's staging area: {line}")
        for stored, target in done.copied:
            _err(f"note: {done.name}@{done.version}: {stored} is stored as a copy of {target} (a symbolic link "
                 "outside the code folder, allowed by --allow-external-links)")
        if done.created:
            print(f"published {done.name}@{done.version} (sha256 {done.sha256[:12]})")
        else:
            print(f"{done.name}@{done.version} already published (same content)")
    return 2 if failed else 0


def _table(items: list[Summary], as_json: bool) -> None:
    if as_json:
        print(json.dumps([s.as_json() for s in items], indent=2))
        return
    width = max([len(s.name) for s in items] + [4])
    vwidth = max([len(s.version) for s in items] + [6])
    for s in items:
        count = f"{s.versions} version{'s' * (s.versions != 1)}"
        count += f", {s.deprecated} deprecated" if s.deprecated else ""
        print(f"{s.name:<{width}}  {s.version:<{vwidth}}  {count:<26}  {s.display_name or s.description[:60]}")


def _list(registry: Registry, args: argparse.Namespace) -> int:
    items = registry.summaries()
    if not items and not args.json:
        _err(f"the registry at {registry.location} is empty; publish with `distcomp registry publish SPEC`")
    _table(items, args.json)
    return 0


def _search(registry: Registry, args: argparse.Namespace) -> int:
    items = registry.search(args.text)
    if not items and not args.json:
        _err(f"nothing in the registry at {registry.location} matches {args.text!r}")
    _table(items, args.json)
    return 0


def _input(name: str, info: Any) -> str:
    if not isinstance(info, dict):
        return name
    extra = "optional" if info.get("optional") else None
    if info.get("default") is not None:
        extra = f"default {info['default']}"
    return f"{name} ({info.get('type')}{', ' + extra if extra else ''})"


def _show(registry: Registry, args: argparse.Namespace) -> int:
    resolved, manifest = registry.describe(parse_reference(args.ref, default="latest"))
    versions = registry.versions(resolved.name)
    about = dict(manifest.summary)
    if args.json:
        print(json.dumps({"name": resolved.name, "version": resolved.version, "sha256": resolved.sha256,
                          "spec": str(resolved.spec_path), "deprecated": resolved.deprecated,
                          "published": manifest.published, "user": manifest.user, "files": len(manifest.files),
                          **about, "versions": [{"version": v.version, "prerelease": v.prerelease,
                                                 "deprecated": v.deprecated} for v in versions]}, indent=2))
        return 0
    print(f"{resolved.name}@{resolved.version}" + (f"  {about['display_name']}" if about.get("display_name") else ""))
    if resolved.deprecated:
        print(f"  DEPRECATED: {resolved.deprecated}")
    if about.get("description"):
        print(f"  {about['description']}")
    print(f"  launcher: {about.get('launcher')}, {about.get('nodes')} node(s) x "
          f"{about.get('processes_per_node') or 1} process(es)")
    raw_inputs, raw_outputs = about.get("inputs"), about.get("outputs")
    inputs = raw_inputs if isinstance(raw_inputs, dict) else {}
    outputs = raw_outputs if isinstance(raw_outputs, dict) else {}
    print(f"  inputs: {', '.join(_input(n, i) for n, i in inputs.items()) or '-'}")
    print(f"  outputs: {', '.join(_input(n, o) for n, o in outputs.items()) or '-'}")
    print(f"  sha256: {resolved.sha256} ({len(manifest.files)} files, verified)")
    print(f"  published: {manifest.published} by {manifest.user}")
    print(f"  stored: {resolved.spec_path}")
    shown = [v.version + (" (deprecated)" if v.deprecated is not None else "") for v in versions[-20:]]
    print(f"  versions: {', '.join(shown)}" + (f" ({len(versions) - 20} older)" if len(versions) > 20 else ""))
    return 0


def _deprecate(registry: Registry, args: argparse.Namespace) -> int:
    ref = parse_reference(args.ref)
    before = registry.versions(ref.name)
    info = registry.deprecate(ref, args.message or "", undo=args.undo)
    was = next((v.deprecated for v in before if v.version == info.version), None)
    name = f"{ref.name}@{info.version}"
    if args.undo:
        print(f"{name} is no longer deprecated" if was is not None else f"{name} was not deprecated")
    else:
        print(f"deprecated {name}" + (f": {args.message}" if args.message else ""))
    return 0


ACTIONS = {"publish": _publish, "list": _list, "show": _show, "search": _search, "deprecate": _deprecate}


def run(args: argparse.Namespace) -> int:
    """Run ``args.registry_command`` against ``args.registry``; RegistryError for the caller."""
    return ACTIONS[args.registry_command](open_registry(args.registry), args)
