#!/usr/bin/env python3
"""Run one GradBench eval against one tool and report what happened (stdlib only).

GradBench's own intermediary is its Rust CLI; this is tapegrad's small stand-in. The eval and
the tool are two processes speaking JSON lines: the eval prints one message per line and waits
for one response line; the tool reads each message and answers it with one line. This script
sits between them: it starts both (in --cwd, normally a GradBench checkout), forwards each
message to the tool and each response to the eval, writes every line to a log (one JSON object
per line, {"elapsed": {"nanoseconds": N}, "message": ...} or {..., "response": ...}), and prints
one line per define and per evaluate (the latter with its validity once the eval says).

Usage:
  run_eval.py [--cwd DIR] [-o LOG.jsonl] [--timeout SECONDS] 'EVAL COMMAND' 'TOOL COMMAND'
The two commands are split as a POSIX shell would split them (shlex), not run by a shell.

Exit status (the last line printed names it):
  0 success    every evaluate succeeded and was judged valid, and the eval exited 0
  1 error      the eval exited non-zero, spoke something that is not a JSON message, or
               evaluated nothing
  2 undefined  the tool answered a define with success false
  3 failure    an evaluate answered success false, the tool closed its output, or a response
               carried the wrong id
  4 invalid    the eval judged an output invalid
  5 timeout    the tool did not answer within --timeout seconds (it is killed)
"""

import argparse
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time

OUTCOMES = {0: "success", 1: "error", 2: "undefined", 3: "failure", 4: "invalid", 5: "timeout"}


def start(command, cwd):
    """Start a command in its own session, so it and its children can be killed together."""
    argv = shlex.split(command)
    if not argv:
        sys.exit(f"run_eval.py: empty command")
    try:
        return subprocess.Popen(argv, cwd=cwd, text=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, start_new_session=True)
    except OSError as e:
        sys.exit(f"run_eval.py: cannot start {argv[0]!r} in {cwd}: {e}")


def lines_of(stream):
    """A queue fed with stream's lines by a thread ("" at the end), so reads can time out."""
    q = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put("")

    threading.Thread(target=pump, daemon=True).start()
    return q


def timings_summary(timings):
    """'evaluate 1.234 ms (mean of 42, min 1.1); prepare 0.5 ms' for a response's timings."""
    ms_by_name = {}
    for t in timings or []:
        ms_by_name.setdefault(t.get("name", "?"), []).append(t.get("nanoseconds", 0) / 1e6)
    parts = []
    for name, ms in ms_by_name.items():
        text = f"{name} {sum(ms) / len(ms):.4g} ms"
        if len(ms) > 1:
            text += f" (mean of {len(ms)}, min {min(ms):.4g})"
        parts.append(text)
    return "; ".join(parts)


def indented(text, limit=2000):
    """The last `limit` characters of an error text, indented under the line it belongs to."""
    return "    " + text.strip()[-limit:].replace("\n", "\n    ")


def kill(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Session:
    def __init__(self, args):
        self.args = args
        self.log = open(args.log, "w") if args.log else None
        self.t0 = time.perf_counter_ns()
        self.counts = dict(undefined=0, failure=0, invalid=0, timeout=0, evaluated=0, error=0)
        self.waiting = {}  # id of a successful evaluate -> its line, printed with its analysis
        self.eval_name = "?"

    def record(self, key, obj):
        if self.log:
            entry = {"elapsed": {"nanoseconds": time.perf_counter_ns() - self.t0}, key: obj}
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def say(self, text):
        print(text, flush=True)

    def run(self):
        args = self.args
        ev = start(args.eval_cmd, args.cwd)
        tool = start(args.tool_cmd, args.cwd)
        responses = lines_of(tool.stdout)
        try:
            self.forward(ev, tool, responses)
        finally:
            for line in self.waiting.values():
                self.say(f"{line}  (never validated)")
            for p in (ev, tool):
                try:
                    p.stdin.close()
                except OSError:
                    pass
            try:
                ev.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill(ev)
                ev.wait()
            try:
                tool.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill(tool)
                tool.wait()
            if self.log:
                self.log.close()
        return self.finish(ev.returncode, tool.returncode)

    def forward(self, ev, tool, responses):
        for line in ev.stdout:
            try:
                msg = json.loads(line)
                msg_id, kind = msg["id"], msg["kind"]
            except (ValueError, KeyError, TypeError):
                self.say(f"the eval printed something that is not a message: {line.strip()[:200]!r}")
                self.counts["error"] += 1
                return
            self.record("message", msg)
            if kind == "analysis":
                self.analysis(msg)
            try:
                tool.stdin.write(json.dumps(msg) + "\n")
                tool.stdin.flush()
            except BrokenPipeError:
                self.say(f"[{msg_id}] {kind}: the tool has exited")
                self.counts["failure"] += 1
                return
            sent = time.perf_counter()
            try:
                resp_line = responses.get(timeout=self.args.timeout)
            except queue.Empty:
                self.say(f"[{msg_id}] {kind}: no response within {self.args.timeout:g} s; killing the tool")
                kill(tool)
                self.counts["timeout"] += 1
                return
            wall = time.perf_counter() - sent
            if resp_line == "":
                self.say(f"[{msg_id}] {kind}: the tool closed its output")
                self.counts["failure"] += 1
                return
            try:
                resp = json.loads(resp_line)
            except ValueError:
                self.say(f"[{msg_id}] {kind}: the tool answered with something that is not JSON: "
                         f"{resp_line.strip()[:200]!r}")
                self.counts["failure"] += 1
                return
            self.record("response", resp)
            if not isinstance(resp, dict) or resp.get("id") != msg_id:
                got = resp.get("id") if isinstance(resp, dict) else resp
                self.say(f"[{msg_id}] {kind}: the response has id {got!r}")
                self.counts["failure"] += 1
                return
            self.report(msg, resp, wall)
            try:
                ev.stdin.write(json.dumps(resp) + "\n")
                ev.stdin.flush()
            except BrokenPipeError:
                return  # the eval stopped (e.g. after a failed define); its exit status tells

    def analysis(self, msg):
        valid = bool(msg.get("valid"))
        self.counts["invalid"] += not valid
        line = self.waiting.pop(msg.get("of"), f"[{msg.get('of')}]")
        self.say(f"{line}  {'valid' if valid else 'INVALID'}")
        if not valid and msg.get("error"):
            self.say(indented(str(msg["error"])))

    def report(self, msg, resp, wall):
        kind, msg_id = msg["kind"], msg["id"]
        if kind == "start":
            self.eval_name = msg.get("eval", "?")
            self.say(f"[{msg_id}] start eval={self.eval_name} tool={resp.get('tool', '?')}")
        elif kind == "define":
            ok = resp.get("success") is True
            self.counts["undefined"] += not ok
            timings = timings_summary(resp.get("timings"))
            self.say(f"[{msg_id}] define {msg.get('module')}: {'ok' if ok else 'UNDEFINED'}"
                     f" ({wall:.2f} s wall){'  ' + timings if timings else ''}")
            if not ok and resp.get("error"):
                self.say(indented(str(resp["error"])))
        elif kind == "evaluate":
            self.counts["evaluated"] += 1
            what = msg.get("description") or json.dumps(msg.get("input"))[:24]
            line = (f"[{msg_id}] {msg.get('module')}::{msg.get('function', '?'):<10} {what:<24} "
                    f"{timings_summary(resp.get('timings'))}  ({wall:.2f} s wall)")
            if resp.get("success") is True:
                self.waiting[msg_id] = line  # the eval's analysis of it comes next
            else:
                self.counts["failure"] += 1
                self.say(f"{line}  FAILED")
                if resp.get("error"):
                    self.say(indented(str(resp["error"])))

    def finish(self, eval_status, tool_status):
        c = self.counts
        if c["timeout"]:
            status = 5
        elif c["undefined"]:
            status = 2
        elif c["failure"]:
            status = 3
        elif c["invalid"]:
            status = 4
        elif c["error"] or eval_status != 0 or c["evaluated"] == 0:
            status = 1
        else:
            status = 0
        self.say(f"outcome {OUTCOMES[status]}: eval={self.eval_name} evaluated={c['evaluated']} "
                 f"invalid={c['invalid']} failed={c['failure']} "
                 f"(eval exit {eval_status}, tool exit {tool_status})")
        return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("eval_cmd", help="the eval's command line")
    ap.add_argument("tool_cmd", help="the tool's command line")
    ap.add_argument("-o", "--log", help="write every message and response here (JSON lines)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds to wait for each response (default: no limit)")
    ap.add_argument("--cwd", default=".", help="directory both commands run in (default: .)")
    args = ap.parse_args()
    if not os.path.isdir(args.cwd):
        sys.exit(f"run_eval.py: --cwd {args.cwd}: no such directory")
    sys.exit(Session(args).run())


if __name__ == "__main__":
    main()
