"""A parsed command template written back in azure-ai-ml's syntax.

Azure ML substitutes ``${{inputs.x}}`` textually and runs the result in a shell; ``$[[ ... ]]``
vanishes when an optional input inside it is not given. A command already written that way
is kept as written; any other (a Component SDK ``{inputs.x}`` / ``[ ... ]`` template) is
rewritten word by word, literal text shell-quoted so the shell sees what distcomp's own
argv would hold.
"""

from __future__ import annotations

import shlex

from ...spec import CommandTemplate
from ...spec._template import Block, Break, Env, Item, Quote, Ref, Text, parse


def azure_command(template: CommandTemplate) -> str:
    """The command in azure-ai-ml's syntax; it parses back into the same template."""
    as_v2, issues = parse(template.source, "v2")
    if as_v2.items == template.items and not any(i.severity == "error" for i in issues):
        return template.source.strip()
    return _join(template.items)


def _join(items: tuple[Item, ...]) -> str:
    out: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, Break):
            out.append(" ")
        elif isinstance(item, Text):
            out.append(shlex.quote(item.text) if item.text else "")
        elif isinstance(item, Quote):
            following = items[i + 1] if i + 1 < len(items) else None
            # a quoted text or variable that follows says it itself
            if not (isinstance(following, Text) and following.text or isinstance(following, Env) and following.quoted):
                out.append("''")
        elif isinstance(item, Ref):
            out.append(f"${{{{{item.kind}.{item.name}}}}}")
        elif isinstance(item, Env):
            out.append(f'"${{{item.name}}}"' if item.quoted else f"${{{item.name}}}")
        elif isinstance(item, Block):
            out.append(f"$[[{_join(item.items).strip()}]]")
    return "".join(out).strip()
