#!/usr/bin/env python3
"""Checks that src/'s includes run one way (docs/design.md, "The map").

Usage: check_layers.py [SOURCE_DIR]

Each folder of src/ may include, besides the public headers (tapegrad/...) and the standard
and third-party ones, only the folders below it:

    kernels      kernels                      (raw buffers and shapes)
    runtime      runtime, kernels             (the autodiff machine; never ops)
    ops          ops, runtime, kernels        (the compute layer: makes tensors)
    derivatives  derivatives, ops, runtime, kernels
                                              (the functional forms, Jacobians and
                                              vectorized_map: the tape's internals and the
                                              internal ops they record)
    functional, optim, files, layers, distributed: their own folder only (the public API)

A file's layer is its top folder under src/: the op families' folders (src/ops/<family>/)
are the ops layer, as are the shared headers directly in src/ops/.

An include that breaks these rules fails the check unless KNOWN below lists it with its
reason (it is empty: every rule holds); a listed one that no longer exists fails it too, so
the list only shrinks.
"""
import os
import re
import sys

ALLOWED = {
    "kernels": {"kernels"},
    "runtime": {"runtime", "kernels"},
    "ops": {"ops", "runtime", "kernels"},
    "derivatives": {"derivatives", "ops", "runtime", "kernels"},
    "functional": {"functional"},
    "optim": {"optim"},
    "files": {"files"},
    "layers": {"layers"},
    "distributed": {"distributed"},
}

# Tolerated upward includes, (including file, included header) -> why, for a rule that cannot
# be kept yet. Issue 23 ("honest layers") emptied it; an entry added here needs its reason.
KNOWN = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"')


def violations(source_dir):
    found = {}
    src = os.path.join(source_dir, "src")
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(root, name)
            relative = os.path.relpath(path, source_dir).replace(os.sep, "/")
            folder = relative.split("/")[1]
            allowed = ALLOWED.get(folder)
            if allowed is None:
                rule = "src/%s is not in the layer table of %s" % (folder, __file__)
                found[(relative, "")] = (0, rule)
                continue
            with open(path, encoding="utf-8") as text:
                for number, line in enumerate(text, 1):
                    match = INCLUDE.match(line)
                    if not match or match.group(1) == "tapegrad" or match.group(1) in allowed:
                        continue
                    header = match.group(1) + "/" + match.group(2)
                    found.setdefault((relative, header), (number, "src/%s may include only %s" % (
                        folder, ", ".join(sorted(allowed)))))
    return found


def main():
    source_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = violations(source_dir)
    problems = []
    for (path, header), (line, rule) in sorted(found.items()):
        if (path, header) not in KNOWN:
            problems.append("%s:%d: includes %s: %s" % (path, line, header, rule))
    for (path, header) in sorted(KNOWN):
        if (path, header) not in found:
            problems.append("%s no longer includes %s: remove it from KNOWN in %s" % (
                path, header, os.path.basename(__file__)))
    if problems:
        print("\n".join(problems))
        return 1
    print("include layers: %d known exceptions, no new upward include" % len(KNOWN))
    return 0


if __name__ == "__main__":
    sys.exit(main())
