"""Lines for a terminal of a given width: words wrapped whole, a command (`…`) never split.

The CLI's console does not wrap (soft_wrap: a terminal would then fold a long line mid-word), so
what `sagestack plan` prints beside its tables comes through here first."""

from __future__ import annotations

import re

# A word, or a quoted command with what is glued to it ("(`sagestack lock --env dev`):").
_ATOM = re.compile(r"\S*`[^`]*`\S*|\S+")
# The quota increase a shortfall suggests: a command to copy, so it is quoted to stay whole.
_AWS_COMMAND = re.compile(r"(?<!`)aws service-quotas [\w-]+(?: --[\w-]+ [^\s;`]+)*")


def fit(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """`text` as lines of at most `width` characters: the first starts with `indent`, the others
    with `hang` (indent and two blanks). Words and quoted commands are never split: a command too
    long for a line gets lines of its own, continued with ` \\` as a shell reads them (pasted, it
    runs as printed); a word longer than a line runs past the width rather than fold."""
    rest = indent + "  " if hang is None else hang
    lines: list[str] = []
    line, empty = indent, True
    for atom in _ATOM.findall(text):
        if empty:
            line, empty = line + atom, False
        elif len(line) + 1 + len(atom) <= width:
            line += " " + atom
        elif "`" in atom and len(rest) + len(atom) > width:
            head, command, _ = atom.split("`", 2)
            # lines of its own: the brackets and punctuation glued to it go (pasted, they would not run)
            lines.append(line + (" " + head if head.strip("([{") else ""))
            lines += _continued(command.split(), width, rest + "  ")
            line, empty = rest, True
        else:
            lines.append(line)
            line = rest + atom
    if line.strip() or not lines:
        lines.append(line)
    return lines


def _continued(words: list[str], width: int, indent: str) -> list[str]:
    """A command over several lines, each but the last ending in ` \\`; the options keep their
    values on their line (`--quota-code L-P5`)."""
    parts: list[str] = []
    for word in words:
        if parts and not word.startswith("-") and parts[-1].startswith("-") and " " not in parts[-1]:
            parts[-1] += " " + word
        else:
            parts.append(word)
    lines, line = [], indent
    for part in parts:
        if line.strip() and len(line) + 1 + len(part) + 2 > width:
            lines.append(line + " \\")
            line = indent + "  " + part
        else:
            line = line + (" " if line.strip() else "") + part
    lines.append(line)
    return lines


# Where a string too long for a line may go on on the next: after a separator of ARNs, URIs, paths.
_BREAK_AFTER = re.compile(r"[/:.,_=-](?=.)")


def fit_json(line: str, width: int) -> list[str]:
    """One line of an indented JSON document, for reading on a screen `width` wide: a member too
    long goes on with its value under its key (JSON still); a string too long even there is
    broken after a separator with a trailing `\\` (as a YAML double-quoted string goes on), never
    between two letters of a word."""
    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip(" "))]
    key, colon, value = line.lstrip(" ").partition('": ')
    lines = []
    if colon and key.startswith('"'):
        lines.append(f'{indent}{key}":')
        indent, line = indent + "  ", indent + "  " + value
        if len(line) <= width:
            return [*lines, line]
    return [*lines, *broken(line, width, indent)]


def broken(line: str, width: int, indent: str) -> list[str]:
    """A line with a word too long for `width` (an ARN, a URI), broken after its separators, each
    piece but the last ending in `\\`, the next under `indent`."""
    lines = []
    while len(line) > width:
        cuts = list(_BREAK_AFTER.finditer(line, len(indent) + 1, width - 1))
        # a path's or an ARN's own parts first ("…/pytorch-training:" / "2.5-gpu-py311")
        parts = [m.end() for m in cuts if m.group() in "/:" and m.end() > (len(indent) + width) // 2]
        at = (parts or [m.end() for m in cuts] or [width - 1])[-1]
        lines.append(line[:at] + "\\")
        line = indent + line[at:]
    return [*lines, line]


def quote_commands(text: str) -> str:
    """`aws service-quotas …` commands in a message quoted as commands, so `fit` keeps them whole."""
    return _AWS_COMMAND.sub(lambda m: f"`{m.group()}`", text)


def fit_nested(line: str, width: int, indent: str = "") -> list[str]:
    """A line that carries its own indent (a change under its entry), fitted below `indent` with
    its indent kept and its continuation four further in."""
    own = indent + line[: len(line) - len(line.lstrip(" "))]
    return fit(line.lstrip(" "), width, own, own + "    ")
