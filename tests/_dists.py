"""Installing a plugin for a test the way pip leaves it: a package and its .dist-info on a
folder put on ``sys.path``/``PYTHONPATH``, so entry points are found by the real machinery."""

from __future__ import annotations

from pathlib import Path


def install(site: Path, dist: str, module: str, source: str, entry_points: str, version: str = "0.1") -> None:
    """Install package ``module`` (its ``__init__.py`` is ``source``) as distribution ``dist``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / module).mkdir()
    (site / module / "__init__.py").write_text(source, encoding="utf-8")
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    (info / "top_level.txt").write_text(f"{module}\n", encoding="utf-8")
