"""The compile cache's trust rules (backend/cache_trust.py): a damaged
entry (truncated, a flipped byte, no record) is removed and compiled again
with a warning, never loaded, also in a new process; a cache directory or
entry another user could have written (group- or world-writable, another
owner) is not used and nothing is written there; what the cache creates is
0700 / 0600 whatever the umask.

    PYTHONPATH=python pytest -q test/python/backend/test_cache_trust.py
"""

import logging
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch

from torch_mlir_flex import log
from torch_mlir_flex.backend import JitFunction, cache, cache_trust, stage_cache
from torch_mlir_flex.mlir.execution_engine import ExecutionEngine

from test_cache import ADD_EXP  # the same small program

warnings.filterwarnings("ignore")

# Compiles ADD_EXP in a new process, checks it against eager and prints the
# engine's kind and the warnings of the torch_mlir_flex logger.
NEW_PROCESS = textwrap.dedent(f"""
    import logging, torch_mlir_flex, torch
    from torch_mlir_flex import log
    from torch_mlir_flex.backend import JitFunction
    with log.capture(logging.WARNING) as warned:
        fn = JitFunction({ADD_EXP!r}, pipeline="reference")
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(fn(a, b), torch.exp(a + b))
    print(type(fn.engine).__name__)
    for w in warned:
        print("WARNING", w)
""")

OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")


@pytest.fixture
def cache_dir(cache_dir, monkeypatch):
    monkeypatch.delenv(cache.CHILD_ENV, raising=False)  # "auto": small modules compile here
    return cache_dir


@pytest.fixture
def warned():
    with log.capture(logging.WARNING) as messages:
        yield messages


def run_add_exp(fn):
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(fn(a, b), torch.exp(a + b))


def the_entry(d):
    (name,) = [p for p in os.listdir(d) if p.endswith(".so")]
    return os.path.join(d, name)


def compile_in_a_new_process():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", NEW_PROCESS], env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"status {done.returncode}: {done.stderr[-3000:]}"
    engine, *lines = done.stdout.splitlines()
    return engine, [line[len("WARNING "):] for line in lines if line.startswith("WARNING ")]


def truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def flip_a_byte(path):
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize("damage", [truncate, flip_a_byte])
def test_damaged_shared_object_is_compiled_again_in_a_new_process(cache_dir, damage):
    """The measured bug: a truncated entry killed the next process with
    SIGBUS when it mapped it. Now the new process finds the entry does not
    match its record, removes it, warns and compiles; the next one loads
    the entry it stored."""
    JitFunction(ADD_EXP, pipeline="reference")
    path = the_entry(cache_dir)
    damage(path)
    engine, warnings_ = compile_in_a_new_process()
    assert engine == "ExecutionEngine"
    assert any("removing a damaged entry" in w and path in w for w in warnings_), warnings_
    assert cache_trust.verify_file(the_entry(cache_dir))  # stored again, whole
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, cache.SharedObjectEngine)
    run_add_exp(fn)


def test_entry_without_a_record_is_compiled_again(cache_dir, warned):
    """An entry of an older cache, or one whose writer was killed before
    the record: removed, not loaded."""
    JitFunction(ADD_EXP, pipeline="reference")
    path = the_entry(cache_dir)
    os.remove(path + cache_trust.RECORD_SUFFIX)
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, ExecutionEngine)
    run_add_exp(fn)
    assert any("has no record" in w for w in warned)
    assert os.path.exists(path + cache_trust.RECORD_SUFFIX)  # stored again


def test_verification_is_remembered_but_not_past_a_change(cache_dir):
    JitFunction(ADD_EXP, pipeline="reference")
    path = the_entry(cache_dir)
    assert cache_trust.verify_file(path)
    assert cache_trust.verify_file(path)  # remembered (inode, size, times)
    truncate(path)
    with pytest.raises(cache_trust.Corrupt, match="truncated"):
        cache_trust.verify_file(path)


def test_damaged_stage_entry_is_removed(cache_dir, warned):
    stage_cache.store("k" * 40, {"ir": "module {}"})
    path = os.path.join(cache_dir, "k" * 40 + stage_cache.SUFFIX)
    assert stage_cache.load("k" * 40) == {"ir": "module {}"}
    flip_a_byte(path)
    assert stage_cache.load("k" * 40) is None
    assert not os.path.exists(path) and not os.path.exists(path + cache_trust.RECORD_SUFFIX)
    assert any("removing a damaged entry" in w for w in warned)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_directory_others_can_write_is_not_used(tmp_path, monkeypatch, warned, mode):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, mode)
    monkeypatch.setenv(cache.DIR_ENV, str(root))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(stage_cache.ENABLE_ENV, raising=False)
    for _ in range(2):
        fn = JitFunction(ADD_EXP, pipeline="reference")
        assert isinstance(fn.engine, ExecutionEngine)
        run_add_exp(fn)
    stage_cache.store("k" * 40, {"ir": "module {}"})
    assert os.listdir(root) == []  # nothing written there
    refusals = [w for w in warned if "not using the cache directory" in w]
    assert len(refusals) == 1 and str(root) in refusals[0] and f"mode {mode:04o}" in refusals[0]
    # Not used for the rest of the process, even once fixed.
    os.chmod(root, 0o700)
    JitFunction(ADD_EXP, pipeline="reference")
    assert os.listdir(root) == []


@as_root
def test_directory_of_another_owner_is_not_used(tmp_path, monkeypatch, warned):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    monkeypatch.setenv(cache.DIR_ENV, str(root))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, ExecutionEngine)
    run_add_exp(fn)
    assert os.listdir(root) == []
    assert any(f"owned by uid {OTHER_UID}" in w and str(root) in w for w in warned)


@as_root
@pytest.mark.parametrize("whose", ["entry", "record"])
def test_entry_of_another_owner_is_not_used(cache_dir, warned, whose):
    JitFunction(ADD_EXP, pipeline="reference")
    path = the_entry(cache_dir)
    os.chown(path if whose == "entry" else path + cache_trust.RECORD_SUFFIX, OTHER_UID, OTHER_UID)
    for _ in range(2):
        fn = JitFunction(ADD_EXP, pipeline="reference")
        assert isinstance(fn.engine, ExecutionEngine)  # not loaded
        run_add_exp(fn)
    assert any(f"owned by uid {OTHER_UID}" in w and path in w for w in warned)
    assert os.path.exists(path) and os.path.exists(path + cache_trust.RECORD_SUFFIX)  # left alone
    owner = os.stat(path if whose == "entry" else path + cache_trust.RECORD_SUFFIX).st_uid
    assert owner == OTHER_UID  # and not replaced


def test_entry_others_can_write_is_not_used(cache_dir, warned):
    JitFunction(ADD_EXP, pipeline="reference")
    path = the_entry(cache_dir)
    os.chmod(path, 0o620)
    fn = JitFunction(ADD_EXP, pipeline="reference")
    assert isinstance(fn.engine, ExecutionEngine)
    run_add_exp(fn)
    assert any("lets group write it" in w and path in w for w in warned)


def test_stage_entry_others_can_write_is_not_used(cache_dir, warned):
    stage_cache.store("k" * 40, {"ir": "module {}"})
    path = os.path.join(cache_dir, "k" * 40 + stage_cache.SUFFIX)
    os.chmod(path, 0o606)
    assert stage_cache.load("k" * 40) is None
    stage_cache.store("k" * 40, {"ir": "other"})  # not replaced either
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o606
    assert any("lets others write it" in w for w in warned)


def test_created_private_whatever_the_umask(tmp_path, monkeypatch):
    root = tmp_path / "new" / "cache"
    monkeypatch.setenv(cache.DIR_ENV, str(root))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(stage_cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(cache.CHILD_ENV, raising=False)
    old = os.umask(0)
    try:
        JitFunction(ADD_EXP, pipeline="reference")  # a .so, its record, a lowered stage entry
        monkeypatch.setenv(cache.CHILD_ENV, "1")  # and one linked from a child's object
        JitFunction(ADD_EXP.replace("math.exp", "math.sqrt"), pipeline="reference")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    names = os.listdir(root)
    kinds = {os.path.splitext(n)[1] for n in names}
    assert kinds == {".so", stage_cache.SUFFIX, cache_trust.RECORD_SUFFIX}, names
    assert len([n for n in names if n.endswith(".so")]) == 2
    for name in names:
        assert stat.S_IMODE(os.stat(root / name).st_mode) == 0o600, name


def test_directory_that_cannot_be_made(tmp_path, monkeypatch, warned):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(cache.DIR_ENV, str(tmp_path / "file" / "cache"))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    for _ in range(2):
        fn = JitFunction(ADD_EXP, pipeline="reference")
        assert isinstance(fn.engine, ExecutionEngine)
        run_add_exp(fn)
    assert sum(str(tmp_path / "file" / "cache") in w for w in warned) == 1, warned  # once


def test_rules_for_root_are_those_for_any_uid():
    st = os.stat_result((stat.S_IFDIR | 0o700, 0, 0, 1, 0, 0, 0, 0, 0, 0))
    assert cache_trust.writable_by_others(st, uid=0) == ""
    assert "owned by uid 0" in cache_trust.writable_by_others(st, uid=1000)
    st = os.stat_result((stat.S_IFDIR | 0o775, 0, 0, 1, 0, 0, 0, 0, 0, 0))
    assert "lets group write it" in cache_trust.writable_by_others(st, uid=0)
