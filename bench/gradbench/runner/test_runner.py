#!/usr/bin/env python3
"""Tests of the GradBench runner that need no GradBench checkout (stdlib only; ctest runs it).

run_eval.py is run between a fake eval and a fake tool, both written here: the eval asks for
the square of 3 and judges the answer, the tool answers as its mode says (right, wrong, failing,
undefined, silent, exiting, wrong id). Checked: the exit status and outcome line of each case,
the log's framing, log_table.py's table of the logs, and run.sh's refusal of a non-checkout.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_EVAL = os.path.join(HERE, "run_eval.py")
LOG_TABLE = os.path.join(HERE, "log_table.py")
RUN_SH = os.path.join(os.path.dirname(HERE), "run.sh")

FAKE_EVAL = textwrap.dedent("""
    import json, sys
    def send(msg):
        print(json.dumps(msg), flush=True)
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        resp = json.loads(line)
        assert resp["id"] == msg["id"], (resp, msg)
        return resp
    send({"id": 0, "kind": "start", "eval": "fake"})
    if not send({"id": 1, "kind": "define", "module": "fake"}).get("success"):
        sys.exit(0)
    resp = send({"id": 2, "kind": "evaluate", "module": "fake", "function": "square",
                 "input": 3.0, "description": "x=3"})
    if resp.get("success"):
        ok = resp.get("output") == 9.0
        analysis = {"id": 3, "kind": "analysis", "of": 2, "valid": ok}
        if not ok:
            analysis["error"] = "expected 9.0"
        send(analysis)
""")

FAKE_TOOL = textwrap.dedent("""
    import json, sys, time
    mode = sys.argv[1]
    for line in sys.stdin:
        msg = json.loads(line)
        resp = {"id": msg["id"] + (1 if mode == "wrong-id" else 0)}
        if msg["kind"] == "start":
            resp["tool"] = "fake-" + mode
        elif msg["kind"] == "define":
            resp["success"] = mode != "undefined"
            if mode == "undefined":
                resp["error"] = "no such module"
        elif msg["kind"] == "evaluate":
            if mode == "silent":
                time.sleep(60)
            if mode == "exits":
                sys.exit(3)
            if mode == "fails":
                resp.update(success=False, error="out of memory")
            else:
                x = msg["input"]
                resp.update(success=True, output=x * x + (1 if mode == "wrong" else 0),
                            timings=[{"name": "evaluate", "nanoseconds": 2000000},
                                     {"name": "evaluate", "nanoseconds": 4000000},
                                     {"name": "prepare", "nanoseconds": 1}])
        print(json.dumps(resp), flush=True)
""")


class RunnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        for name, text in (("eval.py", FAKE_EVAL), ("tool.py", FAKE_TOOL)):
            with open(os.path.join(cls.tmp.name, name), "w") as f:
                f.write(text)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_eval(self, mode, timeout=20):
        log = os.path.join(self.tmp.name, f"{mode}.jsonl")
        py = sys.executable
        p = subprocess.run([py, RUN_EVAL, "--cwd", self.tmp.name, "-o", log, "--timeout", str(timeout),
                            f"{py} eval.py", f"{py} tool.py {mode}"],
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, log

    def table(self, *logs):
        p = subprocess.run([sys.executable, LOG_TABLE, *logs], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.splitlines()

    def test_valid(self):
        status, out, log = self.run_eval("right")
        self.assertEqual(status, 0, out)
        self.assertIn("start eval=fake tool=fake-right", out)
        self.assertIn("define fake: ok", out)
        self.assertRegex(out, r"fake::square +x=3 +evaluate 3 ms \(mean of 2, min 2\); prepare .*valid")
        self.assertTrue(out.splitlines()[-1].startswith("outcome success: eval=fake evaluated=1 invalid=0"))
        with open(log) as f:
            entries = [json.loads(line) for line in f]
        # Every message, then its response, each with the time since the start.
        self.assertEqual([next(k for k in e if k != "elapsed") for e in entries], ["message", "response"] * 4)
        self.assertEqual([e.get("message", e.get("response"))["id"] for e in entries], [0, 0, 1, 1, 2, 2, 3, 3])
        elapsed = [e["elapsed"]["nanoseconds"] for e in entries]
        self.assertEqual(elapsed, sorted(elapsed))
        self.assertEqual(entries[5]["response"]["output"], 9.0)
        self.assertEqual(self.table(log), ["| eval | workload | fake-right square |",
                                           "|---|---|---:|",
                                           "| fake | x=3 | 3 |"])

    def test_invalid(self):
        status, out, log = self.run_eval("wrong")
        self.assertEqual(status, 4, out)
        self.assertIn("INVALID", out)
        self.assertIn("expected 9.0", out)
        self.assertIn("outcome invalid", out.splitlines()[-1])
        self.assertEqual(self.table(log)[2], "| fake | x=3 | 3! |")

    def test_failed_evaluate(self):
        status, out, log = self.run_eval("fails")
        self.assertEqual(status, 3, out)
        self.assertIn("FAILED", out)
        self.assertIn("out of memory", out)
        self.assertEqual(self.table(log)[2], "| fake | x=3 | failed |")

    def test_undefined(self):
        status, out, _ = self.run_eval("undefined")
        self.assertEqual(status, 2, out)
        self.assertIn("define fake: UNDEFINED", out)
        self.assertIn("no such module", out)

    def test_timeout(self):
        status, out, _ = self.run_eval("silent", timeout=1)
        self.assertEqual(status, 5, out)
        self.assertIn("no response within 1 s", out)

    def test_tool_exits(self):
        status, out, _ = self.run_eval("exits")
        self.assertEqual(status, 3, out)
        self.assertIn("the tool closed its output", out)

    def test_wrong_id(self):
        status, out, _ = self.run_eval("wrong-id")
        self.assertEqual(status, 3, out)
        self.assertIn("the response has id 1", out)

    def test_table_of_two_tools(self):
        logs = [self.run_eval(mode)[2] for mode in ("right", "wrong")]
        self.assertEqual(self.table(*logs), ["| eval | workload | fake-right square | fake-wrong square |",
                                             "|---|---|---:|---:|",
                                             "| fake | x=3 | 3 | 3! |"])

    def test_run_sh_needs_a_checkout(self):
        p = subprocess.run(["bash", RUN_SH, self.tmp.name, "hello"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not a GradBench checkout", p.stderr)
        p = subprocess.run(["bash", RUN_SH], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("usage: run.sh GRADBENCH_DIR", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
