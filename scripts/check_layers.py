#!/usr/bin/env python3
"""Checks that src/'s includes run one way (docs/design.md, "The map").

Usage: check_layers.py [SOURCE_DIR]

Each folder of src/ may include, besides the public headers (tapegrad/...) and the standard
and third-party ones, only the folders below it:

    kernels      kernels                      (raw buffers and shapes)
    runtime      runtime, kernels             (the autodiff machine; never ops)
    ops          ops, runtime, kernels
    derivatives  derivatives, ops, runtime, kernels
                                              (the functional forms, Jacobians and
                                              vectorized_map: the tape's internals and the
                                              internal ops they record)
    functional, optim, files, layers, distributed: their own folder only (the public API)

A file's layer is its top folder under src/: the op families' folders (src/ops/<family>/)
are the ops layer, as are the shared headers directly in src/ops/.

The includes that break these rules today are listed in KNOWN below, each with the reason it
is still there. The check fails on an include that breaks a rule and is not listed (a new
upward include), and on a listed one that no longer exists (so the list only shrinks).
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

# Why the known exceptions are still there. Issue 23 ("honest layers") removes them by moving
# tensor creation into one compute layer, the functional forms, Jacobians and vectorized trace
# into src/derivatives/, and the optimizers' steps among the ops.
TAPE_INTERNALS = "implemented on the tape's internals (GradientTape, traces, warnings)"
KERNEL_HELPERS = "borrows the dtype dispatch or the shape messages of kernels/"
IN_PLACE = "updates its slots and variables in their own buffers when no one else holds them"

# (including file, included header) -> why.
KNOWN = {
    ("src/optim/adam_update.cpp", "kernels/dispatch.hpp"): KERNEL_HELPERS,
    ("src/optim/adam_update.cpp", "runtime/in_place.hpp"): IN_PLACE,
    ("src/optim/lbfgs.cpp", "kernels/dispatch.hpp"): KERNEL_HELPERS,
    ("src/optim/lbfgs.cpp", "kernels/shape_util.hpp"): KERNEL_HELPERS,
    ("src/optim/optimizers.cpp", "kernels/dispatch.hpp"): KERNEL_HELPERS,
    ("src/optim/optimizers.cpp", "kernels/shape_util.hpp"): KERNEL_HELPERS,
    ("src/optim/optimizers.cpp", "runtime/in_place.hpp"): IN_PLACE,
    ("src/optim/optimizers.cpp", "runtime/op_trace.hpp"): TAPE_INTERNALS,
    ("src/optim/optimizers.cpp", "runtime/warn.hpp"): TAPE_INTERNALS,
}

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
