#!/usr/bin/python3
"""The layering check (docs/architecture.md "Modules"): a file in src/<module>/ or
include/fluence/<module>/ may include the headers of its own module and of the modules below it,
never of one above it. The order, bottom to top:

    core -> data -> model -> privacy -> fl -> {influence, lia, fldp, whatif, audit} -> io -> app

The command modules of one level do not include each other, except that fldp and whatif use
influence's solvers and estimators.

Usage: check_layering.py SOURCE_DIR
Prints one line per include that breaks the order (file:line, the include, the modules the file
may use) and exits 1 when there is any; exits 0 otherwise.
"""

import os
import re
import sys

ORDER = ["core", "data", "model", "privacy", "fl", ("influence", "lia", "fldp", "whatif", "audit"),
         "io", "app"]
# The allowed includes within a level: fldp and whatif use influence's solvers, lia audits its
# DP-SGD with audit's statistics (lia/record_canaries.hpp).
PEERS = {"fldp": {"influence"}, "whatif": {"influence"}, "lia": {"audit"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed_modules():
    """Each module mapped to the modules its files may include (itself among them)."""
    allowed, below = {}, set()
    for level in ORDER:
        level = level if isinstance(level, tuple) else (level,)
        for module in level:
            allowed[module] = below | {module} | PEERS.get(module, set())
        below |= set(level)
    return allowed


def module_of(path, root):
    """The module of a file under src/<module>/ or include/fluence/<module>/, else None."""
    parts = os.path.relpath(path, root).split(os.sep)
    if len(parts) >= 3 and parts[0] == "src":
        return parts[1]
    if len(parts) >= 4 and parts[:2] == ["include", "fluence"]:
        return parts[2]
    return None


def included_module(target, including_file, root):
    """The module a quoted include names: "fluence/<module>/..." through the include path, any other
    name relative to the including file's folder."""
    if target.startswith("fluence/"):
        return target.split("/")[1]
    return module_of(os.path.normpath(os.path.join(os.path.dirname(including_file), target)), root)


def violations(root):
    allowed = allowed_modules()
    found = []
    for top in ("src", os.path.join("include", "fluence")):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                path = os.path.join(folder, name)
                module = module_of(path, root)
                if module is None or not name.endswith((".cpp", ".hpp", ".h", ".in")):
                    continue
                if module not in allowed:
                    found.append(f"{os.path.relpath(path, root)}: module '{module}' is not in the "
                                 "layering order (scripts/check_layering.py ORDER)")
                    continue
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = included_module(match.group(1), path, root)
                        if target is not None and target not in allowed[module]:
                            found.append(
                                f"{os.path.relpath(path, root)}:{number}: includes "
                                f"\"{match.group(1)}\" ({target}), above {module}; {module} may "
                                f"include {', '.join(sorted(allowed[module]))}")
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = violations(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} include(s) against the layering (docs/architecture.md)")
        return 1
    print("layering: every include goes down the module order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
