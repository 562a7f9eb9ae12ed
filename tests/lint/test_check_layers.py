#!/usr/bin/env python3
"""Tests of tools/lint/check_layers.py on the fixture trees next to this file (ctest: lint.check_layers).

fixtures/bad holds one of each offence; fixtures/good holds none."""
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
        self.assertEqual(len(lines), len(EXPECTED_BAD), r.stdout)  # comments, detail/, same layer: no offence

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
