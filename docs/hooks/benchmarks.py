"""An mkdocs hook: the benchmarks' results, drawn at build time from the JSON files `make bench`
writes (``benchmarks/results/SCRIPT.json``, ``benchmarks/_report.py``), so the page shows what
was measured, not numbers typed by hand. A page asks with a line of its own:

- ``<!-- benchmark-plot -->``: an inline SVG of launch.py's and tracking.py's ratios to the raw
  tool (one bar a row, log scale, a line at 1 = the raw tool, a tick at each row's goal), with
  a caption naming the files, their date and the machine;
- ``<!-- benchmark-results -->``: a table of every row of every results file there is.

The SVG is written by hand (no matplotlib: the site builds offline with only the docs extra).
A results file missing or malformed stops the build with an error naming it."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from collections.abc import Callable
from typing import Any

from mkdocs.exceptions import PluginError

PLOT = "<!-- benchmark-plot -->"
TABLE = "<!-- benchmark-results -->"
RESULTS = "benchmarks/results"  # from the folder of mkdocs.yml
PLOTTED = ("launch", "tracking")
ORDER = ("validate", "launch", "tracking", "new_store", "targets", "registry", "function", "slurm", "ray")  # `make bench`'s

# the SVG's geometry, in px of its viewBox
ROW_H, HEAD_H, TOP, BOTTOM, PLOT_W, PAD, VALUE_W = 20, 26, 46, 10, 420, 16, 56
MET, MISSED, NO_GOAL = "#2e7d32", "#e65100", "#78909c"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if PLOT not in markdown and TABLE not in markdown:
        return markdown
    folder = Path(config["config_file_path"]).parent / RESULTS
    if PLOT in markdown:
        markdown = markdown.replace(PLOT, plot([read(folder / f"{name}.json") for name in PLOTTED]))
    if TABLE in markdown:
        present = [folder / f"{name}.json" for name in ORDER if (folder / f"{name}.json").exists()]
        markdown = markdown.replace(TABLE, table([read(path) for path in present]))
    return markdown


# -- reading -------------------------------------------------------------------------------------

def read(path: Path) -> dict[str, Any]:
    """A results file, checked; PluginError naming the file and what to do otherwise."""
    shown = f"{RESULTS}/{path.name}"
    fix = f"run `make bench` (or benchmarks/{path.stem}.py) and commit {shown}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PluginError(f"{shown}: not found; {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PluginError(f"{shown}: cannot be read ({exc}); {fix}") from None
    except json.JSONDecodeError as exc:
        raise PluginError(f"{shown}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg}); {fix}") from None
    problem = _problem(doc)
    if problem:
        raise PluginError(f"{shown}: {problem}; {fix}")
    doc["file"], doc["name"] = shown, path.stem
    return doc


def _problem(doc: Any) -> str:
    """What is wrong with a results document, or ''."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    for key, kind in (("date", str), ("command", str), ("machine", dict), ("rows", list)):
        if not isinstance(doc.get(key), kind):
            return f"'{key}' is missing or not a {kind.__name__}"
    machine = doc["machine"]
    if not isinstance(machine.get("cores"), int) or not _numbers(machine.get("load_before")):
        return "'machine' needs 'cores' (a number) and 'load_before' (a list of numbers)"
    for i, row in enumerate(doc["rows"], 1):
        if not isinstance(row, dict):
            return f"row {i} is not an object"
        for key in ("id", "label", "raw"):
            if not isinstance(row.get(key), str):
                return f"row {i}: '{key}' is missing or not a string"
        for key in ("ratio", "distcomp_s", "raw_s"):
            if row.get(key) is not None and not _number(row[key]):
                return f"row {i} ({row['id']}): '{key}' is not a number"
        if row.get("ratio") is not None and (row["ratio"] <= 0 or row.get("distcomp_s") is None
                                             or row.get("raw_s") is None):
            return f"row {i} ({row['id']}): a ratio needs 'distcomp_s' and 'raw_s', and must be above 0"
        goal = row.get("goal")
        if goal is not None and (not isinstance(goal, dict) or not isinstance(goal.get("text"), str)
                                 or not isinstance(goal.get("met"), bool)
                                 or (goal.get("ratio") is not None and not _number(goal["ratio"]))):
            return f"row {i} ({row['id']}): 'goal' needs 'text', 'met' (true or false) and a numeric 'ratio' or none"
    return ""


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _numbers(x: Any) -> bool:
    return isinstance(x, list) and bool(x) and all(_number(v) for v in x)


# -- the plot --------------------------------------------------------------------------------------

def ratio_text(x: float) -> str:
    """A ratio as the plot's labels show it: two decimals, or two significant digits below 0.1."""
    if x >= 10:
        return f"{x:.0f}"
    return f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"


def plot(docs: list[dict[str, Any]]) -> str:
    """The figure: the SVG, then its caption (the files, their date, the machine, what was left out)."""
    drawn = [(doc, [r for r in doc["rows"] if r.get("ratio") is not None]) for doc in docs]
    values = [1.0]
    for _doc, rows in drawn:
        for r in rows:
            values.append(r["ratio"])
            if r.get("goal") and r["goal"].get("ratio"):
                values.append(r["goal"]["ratio"])
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    if low == high:
        high += 1
    labels = [r["label"] for _doc, rows in drawn for r in rows]
    label_w = min(440, 20 + 6.4 * max([len(x) for x in labels] + [40]))
    left = label_w + PAD
    width = left + PLOT_W + PAD + VALUE_W  # the values in a column of their own, right of the plot

    def x(v: float) -> float:
        return left + (math.log10(v) - low) / (high - low) * PLOT_W

    height = TOP + sum(HEAD_H + ROW_H * len(rows) for _doc, rows in drawn) + BOTTOM
    out = [f'<svg class="bench-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height}" '
           f'width="100%" role="img" aria-label="distcomp against the raw tool: the ratio of the medians, '
           f'each row of {" and ".join(_file(d) for d in docs)}" font-family="sans-serif" font-size="12" '
           f'fill="currentColor">']
    # the legend, then the axis: a line a decade, the one at 1 (the raw tool) stronger
    out.append(f'<text x="4" y="14">distcomp / raw tool, median of each (log scale; left of 1: distcomp is faster)'
               f'</text><rect x="{width - 214:.0f}" y="5" width="10" height="10" fill="{MET}"/>'
               f'<text x="{width - 200:.0f}" y="14">goal met</text>'
               f'<rect x="{width - 142:.0f}" y="5" width="10" height="10" fill="{MISSED}"/>'
               f'<text x="{width - 128:.0f}" y="14">missed</text>'
               f'<line x1="{width - 74:.0f}" x2="{width - 74:.0f}" y1="3" y2="17" stroke="currentColor" '
               f'stroke-width="3"/><text x="{width - 66:.0f}" y="14">goal</text>')
    for k in range(low, high + 1):
        at = x(10.0 ** k)
        style = 'stroke-opacity="0.8" stroke-dasharray="4 3"' if k == 0 else 'stroke-opacity="0.2"'
        out.append(f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{TOP - 8}" y2="{height - BOTTOM}" stroke="currentColor" '
                   f'{style}/><text x="{at:.1f}" y="{TOP - 12}" text-anchor="middle">'
                   f'{"1 = raw tool" if k == 0 else f"{10.0 ** k:g}"}</text>')
    out.append(f'<text x="{width - 4:.0f}" y="{TOP - 12}" text-anchor="end">ratio</text>')
    y = TOP
    for doc, rows in drawn:
        out.append(f'<text x="4" y="{y + 17}" font-weight="bold">{html.escape(doc["name"])}.py '
                   f'({html.escape(_file(doc))}, {html.escape(_day(doc))})</text>')
        y += HEAD_H
        for r in rows:
            out.append(_bar(doc, r, y, x, width - 4))
            y += ROW_H
    out.append("</svg>")
    return ("<figure class=\"bench-figure\">\n" + "".join(out) + "\n<figcaption>" + caption(docs) +
            "</figcaption>\n</figure>\n")


def _bar(doc: dict[str, Any], r: dict[str, Any], y: int, x: Callable[[float], float], value_x: float) -> str:
    """One row: its label, a bar from 1 to its ratio, the ratio in the right column, its goal's tick."""
    ratio, goal = r["ratio"], r.get("goal")
    color = NO_GOAL if not goal else MET if goal["met"] else MISSED
    left, right = sorted((x(1.0), x(ratio)))
    text = ratio_text(ratio)
    tip = (f"{r['label']}: distcomp {r['distcomp_s']:.3f} s / {r['raw']} {r['raw_s']:.3f} s = {text}"
           + (f"; goal {goal['text']}: {'met' if goal['met'] else 'missed'}" if goal else "; no goal")
           + f"; median of {r.get('rounds', '?')}")
    parts = [f'<g class="bench-row" data-id="{html.escape(doc["name"])}/{html.escape(r["id"])}">'
             f'<title>{html.escape(tip)}</title>',
             f'<text x="16" y="{y + 14}">{html.escape(r["label"])}</text>',
             f'<rect class="bench-bar" x="{left:.1f}" y="{y + 3}" width="{max(right - left, 1.0):.1f}" '
             f'height="{ROW_H - 6}" fill="{color}"/>']
    parts.append(f'<text class="bench-value" x="{value_x:.0f}" y="{y + 14}" text-anchor="end">'
                 f'{text}</text>')
    if goal and goal.get("ratio"):
        at = x(goal["ratio"])
        parts.append(f'<line class="bench-goal" x1="{at:.1f}" x2="{at:.1f}" y1="{y}" y2="{y + ROW_H}" '
                     f'stroke="currentColor" stroke-width="3"/>')
    parts.append("</g>")
    return "".join(parts)


def _file(doc: dict[str, Any]) -> str:
    return str(doc["file"])


def _day(doc: dict[str, Any]) -> str:
    return str(doc["date"])[:10]


def _machine(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    load = " ".join(f"{v:g}" for v in m["load_before"])
    where = f"{m['cores']} cores, load average {load} at the start"
    if _numbers(m.get("load_after")):
        where += ", " + " ".join(f"{v:g}" for v in m["load_after"]) + " at the end"
    if m.get("system"):
        where += f", {m['system']}"
    versions = [f"Python {doc['python']}"] if doc.get("python") else []
    versions += [f"{name} {v}" for name, v in (doc.get("packages") or {}).items() if name != "distcomp"]
    return where + (f"; {', '.join(versions)}" if versions else "")


def caption(docs: list[dict[str, Any]]) -> str:
    said = []
    for doc in docs:
        said.append(f"<code>{html.escape(_file(doc))}</code> ({html.escape(str(doc['date']))}, "
                    f"<code>{html.escape(doc['command'])}</code>; {html.escape(_machine(doc))})")
    text = ("Drawn when this site was built, from " + " and ".join(said) + ". A bar is distcomp's median divided by "
            "the raw tool's, measured side by side in the same run; the tick is the row's goal as a ratio (a goal in "
            "seconds, or in seconds added, divided by the raw tool's median). Hover a bar for its seconds.")
    left_out = [f"{html.escape(r['label'])} ({html.escape(_file(doc))}: "
                f"{html.escape(_short(r.get('error')) or 'no median on both sides')})"
                for doc in docs for r in doc["rows"] if r.get("ratio") is None]
    if left_out:
        text += " Left out, without a ratio: " + "; ".join(left_out) + "."
    return text


def _short(error: Any) -> str:
    return str(error or "").strip().splitlines()[0][:160] if error else ""


# -- the table ---------------------------------------------------------------------------------------

def table(docs: list[dict[str, Any]]) -> str:
    if not docs:
        return f"*No results in `{RESULTS}/` yet: run `make bench`.*\n"
    lines = ["| file | benchmark | distcomp | raw tool | raw | ratio | goal |", "|---|---|---|---|---|---|---|"]
    for doc in docs:
        for r in doc["rows"]:
            name = f"`{doc['file'].rpartition('/')[2]}`"
            if r.get("ratio") is None:
                lines.append(f"| {name} | {_cell(r['label'])} | | {_cell(r['raw'])} | | "
                             f"| error: {_cell(_short(r.get('error')) or 'no median')} |")
                continue
            goal = r.get("goal")
            judged = f"{_cell(goal['text'])}: {'met' if goal['met'] else '**missed**'}" if goal else ""
            lines.append(f"| {name} | {_cell(r['label'])} | {r['distcomp_s']:.3f} s | {_cell(r['raw'])} | "
                         f"{r['raw_s']:.3f} s | {ratio_text(r['ratio'])} | {judged} |")
    lines.append("")
    lines += [f"*`{doc['file']}`: {_cell(str(doc['date']))}, `{doc['command']}`, {_cell(_machine(doc))}.*  "
              for doc in docs]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|")
