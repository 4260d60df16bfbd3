"""A parsed command template written back in azure-ai-ml's syntax.

Azure ML substitutes ``${{inputs.x}}`` textually and runs the result in a shell; ``$[[ ... ]]``
vanishes when an optional input inside it is not given. The command is the author's shell
line on both sides, so only the references and optional blocks change spelling (a Component
SDK ``{inputs.x}`` / ``[ ... ]`` template becomes ``${{inputs.x}}`` / ``$[[ ... ]]``); the rest
is kept as written, operators and ``$VAR`` included.
"""

from __future__ import annotations

from ...spec import CommandTemplate


def azure_command(template: CommandTemplate) -> str:
    """The command in azure-ai-ml's syntax; it parses back into the same template."""
    return template.source.strip() if template.dialect == "v2" else template.as_v2()
