#!/usr/bin/python3
"""Rewrite the key tables of inputs/README.md from the deck schema, keeping the prose around them.

The tables (a "### " heading and the table under it, one per deck section) are what
`fluence keys --markdown` prints from the keys the modules declare (register_<module>_keys); the
prose between a heading and its table, and after it, stays. A section new in the schema gets its
heading and table after the section before it; a section gone from the schema loses its heading and
table (and keeps its prose, to be moved by hand). The unit test Deck.InputsReadmeTablesAreTheSchemas
fails until this has been run after a key changed.

Usage: /usr/bin/python3 scripts/update_key_tables.py build/fluence [inputs/README.md]
"""
import subprocess
import sys


def blocks(lines):
    """Splits "### heading" blocks: [(heading, [lines])]."""
    out = []
    for line in lines:
        if line.startswith("### "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def section_name(heading):
    """The `[...]` part of a heading ("Top level" for the top-level keys)."""
    start = heading.find("`")
    return heading[start:heading.find("`", start + 1) + 1] if start >= 0 else heading


def main():
    binary = sys.argv[1]
    readme = sys.argv[2] if len(sys.argv) > 2 else "inputs/README.md"
    generated = subprocess.run([binary, "keys", "--markdown"], check=True, capture_output=True,
                               text=True).stdout.splitlines()
    text = open(readme, encoding="utf-8").read().splitlines()
    begin = text.index("## Keys") + 1
    end = next(i for i in range(begin, len(text)) if text[i].startswith("## "))
    old = {section_name(h): body for h, body in blocks(text[begin:end])}
    first_heading = next(i for i in range(begin, end) if text[i].startswith("### "))
    keys = text[begin:first_heading]  # the prose under "## Keys"
    for heading, body in blocks(generated):
        table = [line for line in body if line.startswith("|")]
        prose = old.get(section_name(heading), [""])
        # The prose is everything of the old block but its table: before it and after it.
        first = next((i for i, line in enumerate(prose) if line.startswith("|")), len(prose))
        last = first
        while last < len(prose) and prose[last].startswith("|"):
            last += 1
        before, after = prose[:first], prose[last:]
        if not before or before[0] != "":
            before = [""] + before
        if not after or after[-1] != "":
            after = after + [""]
        keys += [heading] + before + table + after
    while keys and keys[-1] == "":
        keys.pop()
    out = text[:begin] + keys + [""] + text[end:]
    open(readme, "w", encoding="utf-8").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
