"""No tracked file names an absolute path of one machine.

A fresh clone must work in any directory with any venv, so paths of the
machine a file was written on must not appear in the repository.

Rule (applied to every text file listed by ``git ls-files``): an absolute path
token is a ``/`` not preceded by a word character, ``.``, ``~``, ``$``, ``}``,
``:`` or ``/`` (so relative paths such as ``.venv/bin``, ``$PWD/python`` and
URLs are not tokens), followed by one or more path components.  A token is flagged when
  * its first component is one of the per-user or per-machine roots
    ``work``, ``home``, ``root``, ``Users``, ``mnt``, ``scratch``; or
  * any component is ``site-packages``, ``dist-packages``, ``venv``,
    ``.venv`` or a ``python3.N`` lib directory (an installed environment).
Not flagged: system locations that are the same on every Linux machine
(``/usr/bin/env`` shebangs, ``/proc/self/...``, ``/dev/null``, ``/usr/lib/...``
library fallbacks, ``/tmp/<name>`` scratch outputs).  ``.gitignore`` files are
skipped (their leading ``/`` means "repository root").
Write ``<venv>/...`` or a repository-relative path instead, and find tools with
``torch_mlir_flex.tools.find_tool``.
"""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MACHINE_ROOTS = {"work", "home", "root", "Users", "mnt", "scratch"}
ENV_COMPONENTS = {"site-packages", "dist-packages", "venv", ".venv"}
PYLIB = re.compile(r"^python3\.\d+$")
TOKEN = re.compile(r"(?<![\w.~$}:/])/((?:[\w.+-]+/)*[\w.+-]+)")


def flagged(line: str):
    """The absolute paths of ``line`` that break the rule."""
    bad = []
    for m in TOKEN.finditer(line):
        parts = m.group(1).split("/")
        if parts[0] in MACHINE_ROOTS or any(
                p in ENV_COMPONENTS or PYLIB.match(p) for p in parts[:-1]):
            bad.append("/" + m.group(1))
    return bad


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [f for f in out.decode().split("\0") if f]


def test_rule_examples():
    machine = "/" + "work/venv/bin/activate"
    venv = "/" + "opt/env/lib/python3.11/site-packages/llvm/bin/FileCheck"
    assert flagged(f"source {machine}") == [machine]
    assert flagged(f"FC={venv}") == [venv]
    home = "/" + "home/me/src/python"
    assert flagged(f"PYTHONPATH={home} x") == [home]
    for ok in ("#!/usr/bin/env bash", 'open("/proc/self/statm")', "-o /dev/null",
               "source .venv/bin/activate", "$PWD/python", "https://github.com/a/b",
               "<venv>/lib/libiomp5.so", "--out /tmp/crashes",
               '"/usr/lib/x86_64-linux-gnu/libomp.so.5"'):
        assert flagged(ok) == [], ok


def test_no_machine_paths_in_tracked_files():
    problems = []
    for rel in tracked_files():
        if os.path.basename(rel) == ".gitignore":
            continue
        path = os.path.join(ROOT, rel)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for no, line in enumerate(lines, 1):
            for p in flagged(line):
                problems.append(f"{rel}:{no}: {p}")
    assert not problems, "absolute machine paths in tracked files:\n" + "\n".join(problems)
