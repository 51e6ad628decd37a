#!/usr/bin/env python3
"""A Markdown table of mean "evaluate" times (ms) from run_eval.py logs (stdlib only).

Usage: log_table.py LOG.jsonl [LOG.jsonl ...]
One row per (eval, workload description), one column per (tool, function). A cell is the mean
of the response's "evaluate" timings, what GradBench scores; "!" marks an output the eval judged
invalid, "failed" an evaluate that answered success false. Exits 1 if a log cannot be read.
"""

import json
import sys


def read_log(path, rows, columns):
    """Adds the cells of one log to rows {(module, description): {column: text}} and columns."""
    tool, messages, cells = "?", {}, {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
            except ValueError:
                raise SystemExit(f"log_table.py: {path}:{number}: not JSON")
            if "message" in entry:
                m = entry["message"]
                messages[m.get("id")] = m
                if m.get("kind") == "analysis" and not m.get("valid") and m.get("of") in cells:
                    cells[m["of"]][2] += "!"
                continue
            r = entry.get("response", {})
            m = messages.get(r.get("id"), {})
            if m.get("kind") == "start":
                tool = r.get("tool") or "?"
            elif m.get("kind") == "evaluate":
                column = f"{tool} {m.get('function', '?')}"
                if column not in columns:
                    columns.append(column)
                if r.get("success"):
                    ms = [t["nanoseconds"] / 1e6 for t in r.get("timings") or []
                          if t.get("name") == "evaluate"]
                    text = f"{sum(ms) / len(ms):.4g}" if ms else "?"
                else:
                    text = "failed"
                cells[r.get("id")] = [(m.get("module", "?"), m.get("description", "")), column, text]
    for row, column, text in cells.values():
        rows.setdefault(row, {})[column] = text


def main(paths):
    if not paths:
        raise SystemExit("usage: log_table.py LOG.jsonl [LOG.jsonl ...]")
    rows, columns = {}, []
    for path in paths:
        try:
            read_log(path, rows, columns)
        except OSError as e:
            raise SystemExit(f"log_table.py: {e}")
    print("| eval | workload | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for (module, description), by_column in rows.items():
        print(f"| {module} | {description} | " + " | ".join(by_column.get(c, "") for c in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
