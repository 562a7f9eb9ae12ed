#!/usr/bin/env python3
"""Tests of tools/lint/check_layers.py on the fixture trees next to this file (ctest: lint.check_layers).

fixtures/bad holds one of each offence; fixtures/good holds none (a same-layer detail/ include
and a test including public headers among them)."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "tools" / "lint" / "check_layers.py"
BAD = HERE / "fixtures" / "bad"
GOOD = HERE / "fixtures" / "good"

EXPECTED_BAD = [
    "include/clpool/core/pool.hpp:4: #include <clpool/policies/locks.hpp>: core may not include policies",
    "backends/clpool/backends/host.hpp:3: #include <clpool/policies/locks.hpp>: backends may not include policies",
    "include/clpool/interop/transfer.hpp:4: #include <clpool/devices/device.hpp>: interop may not include devices"
    " (capabilities do not know each other)",
    "include/clpool/devices/device.hpp:3: #include <clpool/core/missing.hpp>: no such header",
    'include/clpool/devices/device.hpp:4: #include "no_such_neighbour.hpp": no such header',
    "include/clpool/extra/stray.hpp:1: header outside every layer's folder",
    "include/clpool/clpool.hpp:4: #include <clpool/shapes/detail/epoch.hpp>:"
    " umbrella may not include a detail/ header of shapes (only its public headers)",
    "backends/clpool/backends/opencl.hpp:3: #include <clpool/core/detail/counter.hpp>:"
    " backends may not include a detail/ header of core (only its public headers)",
    "tests/core/test_counter.cpp:2: #include <clpool/core/detail/counter.hpp>:"
    " a detail/ header of core outside the library",
    "include/clpool/core/pool.hpp:4: folders in a cycle: core -> policies -> core"
    " (core -> policies: include/clpool/core/pool.hpp:4 <clpool/policies/locks.hpp>;"
    " policies -> core: policies/clpool/policies/locks.hpp:2 <clpool/core/errors.hpp>)",
]


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


class CheckLayers(unittest.TestCase):
    def test_bad_tree_fails_with_one_line_per_offence(self):
        r = run("--root", str(BAD))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        for want in EXPECTED_BAD:
            self.assertEqual(sum(line.startswith(want) for line in lines), 1, f"expected once: {want}\n{r.stdout}")
        self.assertEqual(len(lines), len(EXPECTED_BAD), r.stdout)  # comments, own detail/, same layer: no offence

    def test_a_cross_layer_detail_include_fails_and_a_same_layer_one_passes(self):
        out = run("--root", str(BAD)).stdout
        self.assertIn("backends may not include a detail/ header of core", out)
        self.assertNotIn("include/clpool/core/errors.hpp:", out)  # core's own detail/counter.hpp
        self.assertNotIn("include/clpool/shapes/detail/epoch.hpp:", out)  # a detail/ header including core's public one
        self.assertNotIn("tools/probe.cpp", out)  # a tool including public headers
        good = run("--root", str(GOOD))  # core/pool.hpp includes core/detail/counter.hpp
        self.assertEqual(good.returncode, 0, good.stdout)
        self.assertIn("1 files around them", good.stderr)  # tests/test_pool.cpp was read

    def test_allow_list_admits_a_listed_detail_include_with_a_reason_only(self):
        def with_allow(text):
            with tempfile.TemporaryDirectory() as tmp:
                allow = pathlib.Path(tmp) / "allowed.txt"
                allow.write_text(text)
                return run("--root", str(BAD), "--allow", str(allow))
        listed = "tests/core/test_counter.cpp <clpool/core/detail/counter.hpp>  # a unit test of the counter\n"
        for entry in (listed, "tests/ <clpool/core/detail/counter.hpp>  # everything under tests/\n"):
            r = with_allow(entry)
            self.assertNotIn("tests/core/test_counter.cpp:2:", r.stdout)
            self.assertEqual(len(r.stdout.splitlines()), len(EXPECTED_BAD) - 1, r.stdout)
        r = with_allow("tests/core/test_counter.cpp <clpool/core/detail/counter.hpp>\n")
        self.assertIn("gives no reason", r.stdout)
        self.assertIn("tests/core/test_counter.cpp:2:", r.stdout)
        r = with_allow(listed + "tests/gone.cpp <clpool/core/detail/counter.hpp>  # stale\n")
        self.assertIn("'tests/gone.cpp <clpool/core/detail/counter.hpp>' matches no include", r.stdout)
        r = with_allow(listed + "backends/clpool/backends/opencl.hpp <clpool/core/detail/counter.hpp>  # no\n")
        self.assertIn("the library has no allow-list", r.stdout)
        self.assertIn("backends/clpool/backends/opencl.hpp:3:", r.stdout)  # still an offence

    def test_good_tree_passes(self):
        r = run("--root", str(GOOD))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")

    def test_known_offences_pass_and_a_stale_one_fails(self):
        keys = [line.rsplit("  [", 1)[1].rstrip("]") for line in run("--root", str(BAD)).stdout.splitlines()]
        self.assertEqual(len(keys), len(EXPECTED_BAD))
        with tempfile.TemporaryDirectory() as tmp:
            known = pathlib.Path(tmp) / "known.txt"
            known.write_text("# all of them\n" + "\n".join(keys) + "\n")
            self.assertEqual(run("--root", str(BAD), "--known", str(known)).returncode, 0)
            known.write_text("\n".join(keys[1:]) + "\n")  # one left out: it fails again
            r = run("--root", str(BAD), "--known", str(known))
            self.assertEqual(r.returncode, 1)
            self.assertIn(EXPECTED_BAD[0], r.stdout)
            known.write_text("\n".join(keys) + "\ninclude/clpool/core/pool.hpp: <clpool/gone.hpp>\n")  # stale
            r = run("--root", str(BAD), "--known", str(known))
            self.assertEqual(r.returncode, 1)
            self.assertIn("'include/clpool/core/pool.hpp: <clpool/gone.hpp>' no longer occurs", r.stdout)

    def test_table_round_trips_through_check_doc(self):
        table = run("--print-table").stdout
        self.assertIn("| core | `include/clpool/core/` |", table)
        with tempfile.TemporaryDirectory() as tmp:
            doc = pathlib.Path(tmp) / "DESIGN.md"
            doc.write_text("# x\n\n" + table + "\nmore\n")
            self.assertEqual(run("--check-doc", str(doc)).returncode, 0)
            doc.write_text(table.replace("| core |", "| kernel |"))
            self.assertEqual(run("--check-doc", str(doc)).returncode, 1)


if __name__ == "__main__":
    unittest.main()
