"""What the kernel enforces around a custom rule's process: memory, ptrace, limits, leftovers, ``/tmp``.

Why: a forked child holds only its own request (``zygote``), but a rule runs under the same uid as
the sandbox's handler, so without more it could read the handler's memory (``/proc/<pid>/mem``,
``ptrace``, ``process_vm_readv``), find the function role's keys in its environment, fork a process
that outlives its verdict (``setsid`` leaves the process group that is killed) and reads the next
job's request, or leave files in ``/tmp`` for the next job. Each piece here closes one of those:

* ``set_dumpable(False)`` (``PR_SET_DUMPABLE`` 0) in the handler and the zygote before any event: a
  process of the same uid without ``CAP_SYS_PTRACE`` can then neither ptrace them nor open their
  ``/proc/<pid>/mem`` or ``environ``;
* ``scrub_environment`` in the zygote: the role's keys, the runtime API's address and Lambda's trace
  header leave ``os.environ`` and the process's initial environment block (what ``/proc/self/environ``
  shows) is zeroed, so a child copies none of them;
* ``confine`` in each child, before the rule: rlimits on address space, processes, open files, CPU
  time and core size; ``PR_SET_NO_NEW_PRIVS``; a seccomp filter denying ``ptrace``,
  ``process_vm_readv``/``process_vm_writev`` and ``pidfd_getfd`` (and every syscall of a foreign
  architecture) where the kernel allows one, a log line saying so where it does not;
* ``make_subreaper`` + ``kill_children``: orphans of the rule's processes (a ``setsid`` double fork)
  are re-parented to the subreaper, which kills and reaps every child it has after each run;
* ``private_tmp`` / ``wipe_tmp``: each run gets its own ``TMPDIR``, and everything under the tmp
  root is removed after the run.

Linux only: elsewhere each call is a no-op that says so (``Confinement.missing``).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import resource
import shutil
import signal
import struct
import sys
import time
import uuid
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field

__all__ = [
    "Confinement",
    "Limits",
    "SECRET_ENV_KEYS",
    "children_of",
    "confine",
    "install_seccomp",
    "kill_children",
    "make_subreaper",
    "private_tmp",
    "scrub_environment",
    "set_dumpable",
    "wipe_tmp",
]

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06

#: (audit arch, syscall numbers denied): ptrace, process_vm_readv, process_vm_writev, pidfd_getfd.
_DENIED_SYSCALLS = {
    "x86_64": (0xC000003E, (101, 310, 311, 438)),
    "aarch64": (0xC00000B7, (117, 270, 271, 438)),
}
_X32_SYSCALL_BIT = 0x40000000

#: What a rule's process must not inherit: the function role's keys, the runtime API's address (a
#: process that knew it could fetch the next invocation), Lambda's tracing header.
SECRET_ENV_KEYS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "_X_AMZN_TRACE_ID",
)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg2: int | ctypes.c_void_p = 0) -> None:
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, "prctl is Linux only")
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    value = arg2 if isinstance(arg2, ctypes.c_void_p) else ctypes.c_void_p(arg2)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def set_dumpable(dumpable: bool) -> None:
    """``PR_SET_DUMPABLE``: 0 makes this process's memory, ``environ`` and ptrace closed to its own uid."""
    _prctl(PR_SET_DUMPABLE, 1 if dumpable else 0)


def make_subreaper() -> None:
    """``PR_SET_CHILD_SUBREAPER``: orphans among this process's descendants become its children."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _seccomp_program(machine: str) -> bytes:
    arch, denied = _DENIED_SYSCALLS[machine]
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    checks = [(_BPF_JGE_K, _X32_SYSCALL_BIT)] if machine == "x86_64" else []
    checks += [(_BPF_JEQ_K, nr) for nr in denied]
    # 0: load arch; 1: foreign arch -> deny; 2: load nr; checks...; allow; deny
    deny_at = 3 + len(checks) + 1
    prog = [(_BPF_LD_W_ABS, 0, 0, 4), (_BPF_JEQ_K, 0, deny_at - 2, arch), (_BPF_LD_W_ABS, 0, 0, 0)]
    for i, (op, k) in enumerate(checks):
        prog.append((op, deny_at - (3 + i) - 1, 0, k))
    prog += [(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (_BPF_RET_K, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def install_seccomp() -> str | None:
    """``PR_SET_NO_NEW_PRIVS`` and a filter denying (``EPERM``) the calls that read or write another
    process's memory; None once installed, else why it could not be (the caller logs it)."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in _DENIED_SYSCALLS:
        return f"no seccomp filter for the {machine!r} architecture"
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        code = _seccomp_program(machine)
        buf = ctypes.create_string_buffer(code, len(code))

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        prog = _Prog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
        libc = _libc()
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
            err = ctypes.get_errno()
            return f"seccomp filter refused by the kernel: {os.strerror(err)}"
    except OSError as exc:
        return f"seccomp unavailable: {exc}"
    return None


@dataclass(frozen=True)
class Limits:
    """The rlimits of a rule's process. ``address_space_bytes`` is added to what the process already
    maps when confined (a forked Python with numpy and boto3 maps hundreds of MiB it never touches);
    ``processes`` to the tasks its uid already runs (``RLIMIT_NPROC`` counts the uid's, threads included)."""

    address_space_bytes: int = 2 * 1024**3
    processes: int = 64
    open_files: int = 256
    cpu_seconds: float = 300.0

    @classmethod
    def for_lambda(cls, environ: MutableMapping[str, str] | None = None) -> Limits:
        """The function's configured memory as the address-space headroom (Lambda sets it in MiB)."""
        env = os.environ if environ is None else environ
        try:
            mib = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", ""))
        except ValueError:
            return cls()
        return cls(address_space_bytes=max(256, mib) * 1024**2)


@dataclass
class Confinement:
    """What ``confine`` put in place in this process, and what it could not (with why)."""

    limits: dict[str, int] = field(default_factory=dict)
    seccomp: bool = False
    missing: list[str] = field(default_factory=list)


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _tasks_of(uid: int) -> int:
    """Tasks (threads) of ``uid``'s processes: what ``RLIMIT_NPROC`` counts. A non-dumpable process
    shows as root's in ``/proc`` and is missed: ``Limits.processes`` is headroom enough for those."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return count


def _highest_open_fd() -> int:
    """The highest descriptor this process holds (2 where /proc cannot tell)."""
    try:
        return max((int(fd) for fd in os.listdir("/proc/self/fd")), default=2)
    except (OSError, ValueError):
        return 2


def close_inherited_fds(keep: Iterable[int]) -> None:
    """Close every descriptor but stdin/stdout/stderr and ``keep``: a rule's process holds nothing of
    its parent's (the handler's sockets, its runtime API connection, other requests' pipes)."""
    low = 0
    for fd in sorted({0, 1, 2, *keep}):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low, _highest_open_fd() + 1))


def confine(limits: Limits, cpu_seconds: float | None = None) -> Confinement:
    """Apply ``limits`` and the seccomp filter to this process (a rule's, before the rule's code runs)."""
    done = Confinement()
    cpu = max(1, int(cpu_seconds if cpu_seconds is not None else limits.cpu_seconds) + 1)
    wanted = {
        "RLIMIT_AS": _mapped_bytes() + limits.address_space_bytes,
        "RLIMIT_NPROC": (_tasks_of(os.getuid()) if sys.platform.startswith("linux") else 0)
        + limits.processes,
        # a limit on descriptor numbers, not counts: what the process already holds, plus its allowance
        # (a parent with 1,000 descriptors open left a 256 limit no room for a single open())
        "RLIMIT_NOFILE": _highest_open_fd() + 1 + limits.open_files,
        "RLIMIT_CPU": cpu,
        "RLIMIT_CORE": 0,
    }
    for name, value in wanted.items():
        which = getattr(resource, name, None)
        if which is None:
            done.missing.append(f"{name} is not available here")
            continue
        try:
            _, hard = resource.getrlimit(which)
            capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # CPU: SIGXCPU at the soft limit, SIGKILL at the hard one a second later
            soft_hard = (
                capped,
                capped + 1 if name == "RLIMIT_CPU" and hard == resource.RLIM_INFINITY else capped,
            )
            resource.setrlimit(which, soft_hard)
            done.limits[name] = capped
        except (OSError, ValueError) as exc:
            done.missing.append(f"{name}: {exc}")
    why = install_seccomp()
    if why is None:
        done.seccomp = True
    else:
        done.missing.append(why)
    return done


def scrub_environment(
    environ: MutableMapping[str, str] | None = None, drop: Iterable[str] = SECRET_ENV_KEYS
) -> None:
    """Remove ``drop`` from the environment and zero the process's initial environment block.

    ``os.environ``'s removal unsets each variable for C code too; what ``/proc/<pid>/environ`` shows
    is the block the kernel wrote at exec, which unsetting leaves in place: each kept variable is set
    again (glibc then points at a heap copy) and the block is overwritten with zeros.
    """
    env = os.environ if environ is None else environ
    for key in drop:
        env.pop(key, None)
    if environ is not None or not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50 and 51)
    except (OSError, ValueError, IndexError):
        return
    for key, value in list(os.environ.items()):
        os.environ[key] = value  # putenv: a heap copy, so that nothing points into the block
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def children_of(pid: int, scan: bool = False) -> list[int]:
    """The pids whose parent is ``pid``: its threads' ``children`` files (fast, may miss a child being
    forked right then), or with ``scan`` (or a kernel without them) each ``/proc/<pid>/stat``."""
    if not scan:
        try:
            kids: list[int] = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    kids += [int(k) for k in f.read().split()]
            return kids
        except (OSError, ValueError):
            pass  # a kernel without CONFIG_PROC_CHILDREN
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(name))
    return kids


def kill_children(keep: Iterable[int] = (), timeout_s: float = 5.0) -> int:
    """SIGKILL and reap every child of this process but ``keep``, until none is left (processes
    re-parented to this subreaper while it works included); the number killed."""
    spare, killed = set(keep), 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = [k for k in children_of(os.getpid()) if k not in spare]
        if not kids:  # confirmed by a full scan: the fast listing may miss a child forked just then
            kids = [k for k in children_of(os.getpid(), scan=True) if k not in spare]
        if not kids:
            break
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for kid in kids:
            try:
                os.waitpid(kid, 0)
            except ChildProcessError:
                pass
    return killed


def private_tmp(root: str) -> str:
    """A new directory under ``root`` for one run, mode 0700; ``TMPDIR`` and ``tempfile`` point at it."""
    import tempfile

    path = os.path.join(root, f"rule-{uuid.uuid4().hex}")
    os.mkdir(path, 0o700)
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    return path


def wipe_tmp(root: str) -> None:
    """Remove everything under ``root`` (what one run left for the next)."""
    try:
        entries = os.listdir(root)
    except OSError:
        return
    for name in entries:
        path = os.path.join(root, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError as exc:
            log.warning("the rule sandbox could not remove %s: %s", path, exc)
