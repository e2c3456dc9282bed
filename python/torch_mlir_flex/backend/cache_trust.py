"""The compile cache's trust rules (docs/runtime.md, "The compile cache's
trust rules"): who may have written the cache directory and its entries,
and whether an entry is whole.

The cache loads shared objects (cache.py) and pickles (stage_cache.py): a
file there runs code in this process. As ssh treats its keys, the cache
root and each entry must be owned by this process's effective uid and be
writable by no one else (no group or world write bit); what the cache
creates is created so (directories 0700, files 0600, whatever the umask).
A root that breaks the rule is not used for the rest of the process; an
entry that does is left alone and not used (a warning each).

Each entry has a record `<entry>.sum` ("sha256 <hex digest> <size>"),
written atomically after the entry. Before an entry is mapped or read, its
size and digest must match the record; an entry without a record, or
with a record it does not match (a truncated copy, a killed writer, a full
disk, a flipped byte), is removed and compiled again. A shared object that
passed is remembered for the process by its inode, size and times, so a
second load of an unchanged file does not hash it again, while a truncated
or rewritten one (a new size, mtime or ctime) is hashed anew.
"""

import hashlib
import os
import stat
import tempfile

from ..log import get_logger

RECORD_SUFFIX = ".sum"
DIGEST = "sha256"
DIR_MODE = 0o700
FILE_MODE = 0o600

log = get_logger("cache")

_bad_roots = {}  # root path -> why it is not used (for the rest of the process)
_verified = {}  # entry path -> stat signature of the file that matched its record


class Foreign(Exception):
    """An entry another user could have written: not used, not touched."""


class Corrupt(Exception):
    """An entry that does not match its record (or has none): removed."""


def writable_by_others(st, uid=None) -> str:
    """Why a file or directory with stat `st` could have been written by
    someone other than `uid` (default: this process's effective uid), or
    "" when it could not."""
    uid = os.geteuid() if uid is None else uid
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not by this process's uid {uid}"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit]
    if writers:
        return f"mode {stat.S_IMODE(st.st_mode):04o} lets {' and '.join(writers)} write it"
    return ""


def usable_root(path: str, create: bool) -> bool:
    """Whether the cache root `path` may be used: it exists (made 0700 when
    `create`), is a directory, is this uid's and no one else can write it.
    A root found unusable stays so for the process (warned once)."""
    if path in _bad_roots:
        return False
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not create:
            return False
        try:
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            os.mkdir(path, DIR_MODE)
            os.chmod(path, DIR_MODE)  # whatever the umask cleared
            st = os.stat(path)
        except FileExistsError:
            st = os.stat(path)  # made by another process meanwhile: checked below
        except OSError as e:
            _bad_roots[path] = str(e)
            log.warning("compile cache: cannot create the cache directory %s: %s; compiling without "
                        "the cache for the rest of this process", path, e)
            return False
    except OSError as e:
        return _refuse(path, str(e))
    if not stat.S_ISDIR(st.st_mode):
        return _refuse(path, "not a directory")
    why = writable_by_others(st)
    return _refuse(path, why) if why else True


def refused(path: str) -> bool:
    """Whether the cache root `path` was found unusable in this process."""
    return path in _bad_roots


def _refuse(path: str, why: str) -> bool:
    _bad_roots[path] = why
    log.warning("compile cache: not using the cache directory %s: %s; compiling without the cache for "
                "the rest of this process (a directory others can write could hold code that would "
                "run here; use a directory of your own, mode 0700: chmod 700 %s, or set "
                "TORCH_MLIR_FLEX_CACHE_DIR)", path, why, path)
    return False


def _signature(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_file(path: str, what: str):
    """The lstat of `path` when it is a regular file of this uid that no one
    else can write; raises Foreign otherwise, FileNotFoundError if absent."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise Foreign(f"{what} {path} is not a regular file")
    why = writable_by_others(st)
    if why:
        raise Foreign(f"{what} {path} is {why}")
    return st


def _read_record(path: str):
    """(hex digest, size) of the record of the entry `path`."""
    record = path + RECORD_SUFFIX
    try:
        _check_file(record, "the record")
        with open(record) as f:
            fields = f.read().split()
    except FileNotFoundError:
        raise Corrupt(f"{path} has no record of its size and {DIGEST} ({record})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise Corrupt(f"the record {record} cannot be read: {e}") from None
    if len(fields) != 3 or fields[0] != DIGEST or not fields[2].isdigit():
        raise Corrupt(f"the record {record} is malformed")
    return fields[1], int(fields[2])


def _compare(path: str, digest, size, recorded) -> None:
    want_digest, want_size = recorded
    if size != want_size:
        raise Corrupt(f"{path} has {size} bytes, its record {want_size} (truncated or replaced)")
    if digest() != want_digest:
        raise Corrupt(f"{path} does not match the {DIGEST} digest of its record (changed since stored)")


def verify_file(path: str) -> bool:
    """Checks the entry `path` before it is mapped (a shared object): False
    when absent; True when it is this uid's, matches its record, and may be
    loaded. Raises Foreign or Corrupt."""
    try:
        st = _check_file(path, "the entry")
    except FileNotFoundError:
        return False
    except OSError as e:
        raise Corrupt(f"{path} cannot be examined: {e}") from None
    if _verified.get(path) == _signature(st):
        return True
    recorded = _read_record(path)

    def digest():
        try:
            with open(path, "rb") as f:
                return hashlib.file_digest(f, DIGEST).hexdigest()
        except OSError as e:
            raise Corrupt(f"{path} cannot be read: {e}") from None

    _compare(path, digest, st.st_size, recorded)
    _verified[path] = _signature(st)
    return True


def read_verified(path: str):
    """The bytes of the entry `path` (a pickle) after the checks of
    `verify_file`, or None when absent. Raises Foreign or Corrupt."""
    try:
        _check_file(path, "the entry")
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Corrupt(f"{path} cannot be read: {e}") from None
    recorded = _read_record(path)
    _compare(path, lambda: hashlib.new(DIGEST, data).hexdigest(), len(data), recorded)
    return data


def foreign(path: str) -> bool:
    """Whether the entry `path` or its record exists and could have been
    written by another user (then it is not replaced either)."""
    for p, what in ((path, "the entry"), (path + RECORD_SUFFIX, "the record")):
        try:
            _check_file(p, what)
        except FileNotFoundError:
            pass
        except Foreign:
            return True
    return False


def touch(path: str) -> None:
    """Marks the entry `path` recently used (the size bound's order) and
    keeps its verification for the process."""
    try:
        known = _verified.get(path) == _signature(os.lstat(path))
        os.utime(path)
        if known:
            _verified[path] = _signature(os.lstat(path))
    except OSError:
        pass


def private_file(path: str) -> None:
    """Makes `path` (a file the cache just wrote, e.g. the linker's output)
    0600, whatever the umask was."""
    os.chmod(path, FILE_MODE)


def publish(tmp: str, path: str, data: bytes = None) -> None:
    """Moves the finished file `tmp` (in the entry's directory) to the entry
    `path` (0600), then writes its record atomically. `data`: the file's
    bytes when the caller has them (saves reading it back)."""
    private_file(tmp)
    if data is None:
        with open(tmp, "rb") as f:
            digest = hashlib.file_digest(f, DIGEST).hexdigest()
        size = os.stat(tmp).st_size
    else:
        digest, size = hashlib.new(DIGEST, data).hexdigest(), len(data)
    os.replace(tmp, path)
    write_private(path + RECORD_SUFFIX, f"{DIGEST} {digest} {size}\n".encode())


def write_private(path: str, data: bytes) -> None:
    """Writes `data` to `path` atomically (a 0600 temporary file beside it,
    renamed). Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            remove(tmp)


def remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def remove_entry(path: str) -> None:
    """Removes the entry `path` and its record."""
    _verified.pop(path, None)
    remove(path)
    remove(path + RECORD_SUFFIX)


def reject(path: str, error: Exception, kind: str = "compile cache") -> None:
    """Logs why the entry `path` is not used; removes it when Corrupt (a
    Foreign entry is another user's to remove)."""
    if isinstance(error, Corrupt):
        log.warning("%s: removing a damaged entry, compiling again: %s", kind, error)
        remove_entry(path)
    else:
        log.warning("%s: not using %s: %s; compiling without the cache for it (remove it to let the "
                    "cache store this program again)", kind, path, error)
