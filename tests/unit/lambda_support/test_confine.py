"""``confine``: each piece on its own, in a forked child or a fresh interpreter (never this process)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from tornasole.evaluator.sandbox import confine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")


def _in_child(fn) -> dict:
    """``fn()`` in a forked child; its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            os.write(w, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_the_seccomp_filter_denies_ptrace_and_cross_process_reads_even_of_a_dumpable_process() -> None:
    target = subprocess.Popen(["sleep", "30"])  # dumpable, same uid: only the filter stands in the way
    try:

        def attempt() -> dict:
            libc = ctypes.CDLL(None, use_errno=True)
            done = confine.confine(confine.Limits(), cpu_seconds=5)
            got = libc.ptrace(16, target.pid, None, None)  # PTRACE_ATTACH
            ptrace_errno = ctypes.get_errno()
            buf = ctypes.create_string_buffer(8)
            iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
            far = (ctypes.c_void_p * 2)(0x10000, 8)
            vm = libc.process_vm_readv(target.pid, iov, 1, far, 1, 0)
            return {
                "seccomp": done.seccomp,
                "missing": done.missing,
                "ptrace": [got, ptrace_errno],
                "vm": [vm, ctypes.get_errno()],
                "getpid_still_works": os.getpid() > 0,
            }

        seen = _in_child(attempt)
    finally:
        target.kill()
        target.wait()
    assert seen == {
        "seccomp": True,
        "missing": [],
        "ptrace": [-1, errno.EPERM],
        "vm": [-1, errno.EPERM],
        "getpid_still_works": True,
    }


def test_limits_are_set_and_bound_what_a_rule_can_take() -> None:
    def limited() -> dict:
        highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        confine.confine(confine.Limits(address_space_bytes=256 * 1024**2, open_files=32), cpu_seconds=3)
        got = {
            n: resource.getrlimit(getattr(resource, n))
            for n in ("RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_CORE")
        }
        try:
            bytearray(1024**3)  # past the address-space headroom
            big = "allocated"
        except MemoryError:
            big = "MemoryError"
        files = []
        try:
            for _ in range(4096):  # past the limit, whatever gaps the inherited numbers leave
                files.append(open(os.devnull))  # noqa: SIM115 - counting descriptors
            opened = "all"
        except OSError as exc:
            opened = errno.errorcode[exc.errno]
        return {
            "limits": got,
            "big": big,
            "opened": opened,
            "opened_n": len(files),
            "top": highest,
        }

    seen = _in_child(limited)
    nofile = seen["top"] + 1 + 32  # descriptor numbers: what the process held, plus its allowance of 32
    assert seen["limits"] == {"RLIMIT_NOFILE": [nofile, nofile], "RLIMIT_CPU": [4, 5], "RLIMIT_CORE": [0, 0]}
    assert seen["big"] == "MemoryError"
    assert seen["opened"] == "EMFILE"
    assert 32 <= seen["opened_n"] < nofile  # its own 32 at least (more where inherited numbers had gaps)


def test_a_cpu_bound_rule_is_killed_by_its_cpu_limit() -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child spins until the kernel stops it
        confine.confine(confine.Limits(), cpu_seconds=0.5)
        while True:
            pass
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)


def test_a_scrubbed_environment_holds_no_role_keys_not_even_in_proc_environ() -> None:
    code = (
        "import ctypes, os; from tornasole.evaluator.sandbox import confine; confine.scrub_environment(); "
        "libc = ctypes.CDLL(None); libc.getenv.restype = ctypes.c_char_p; "
        "print(repr((open('/proc/self/environ', 'rb').read(), sorted(k for k in os.environ if 'SECRET' in k "
        "or k.startswith('AWS_LAMBDA_RUNTIME')), libc.getenv(b'KEPT'), os.environ['KEPT'])))"
    )
    env = {
        **os.environ,
        "AWS_SECRET_ACCESS_KEY": "ROLESECRET",
        "AWS_SESSION_TOKEN": "ROLETOKEN",
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
        "KEPT": "kept-value",
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    block, names, c_kept, py_kept = eval(out.stdout)  # noqa: S307 - our own repr
    assert b"ROLESECRET" not in block
    assert b"ROLETOKEN" not in block
    assert b"9001" not in block
    assert names == []
    assert (c_kept, py_kept) == (b"kept-value", "kept-value")  # what is kept still reads, from C too


def test_the_subreaper_kills_a_setsid_grandchild_that_left_the_group() -> None:
    def orphan_maker() -> dict:
        confine.make_subreaper()
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:  # pragma: no cover
            os.setsid()
            grandchild = os.fork()
            if grandchild == 0:
                time.sleep(60)
                os._exit(0)
            os.write(w, str(grandchild).encode())
            os._exit(0)
        os.waitpid(middle, 0)
        grandchild = int(os.read(r, 32))
        adopted = grandchild in confine.children_of(os.getpid())
        killed = confine.kill_children()
        alive = os.path.exists(f"/proc/{grandchild}")
        return {"adopted": adopted, "killed": killed, "alive": alive}

    assert _in_child(orphan_maker) == {"adopted": True, "killed": 1, "alive": False}


def test_the_tmp_root_is_private_per_run_and_wiped(tmp_path) -> None:
    def run() -> dict:
        private = confine.private_tmp(str(tmp_path))
        import tempfile

        with open(os.path.join(tempfile.gettempdir(), "x"), "w") as f:
            f.write("job data")
        return {
            "private": private,
            "mode": oct(os.stat(private).st_mode & 0o777),
            "tmpdir": os.environ["TMPDIR"],
        }

    seen = _in_child(run)
    assert seen["tmpdir"] == seen["private"]
    assert seen["mode"] == "0o700"
    (tmp_path / "left-at-root").write_text("x")
    confine.wipe_tmp(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_the_seccomp_program_denies_a_foreign_architecture_and_x32_calls() -> None:
    import struct

    code = confine._seccomp_program("x86_64")
    prog = [struct.unpack("HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    deny = len(prog) - 1
    assert prog[deny] == (confine._BPF_RET_K, 0, 0, confine.SECCOMP_RET_ERRNO | errno.EPERM)
    assert prog[1][2] + 2 == deny  # a foreign arch jumps to deny
    for i, (op, jt, _, k) in enumerate(prog[3:-2], start=3):
        assert i + 1 + jt == deny, (i, op, k)
    assert {k for op, _, _, k in prog[3:-2]} == {0x40000000, 101, 310, 311, 438}


def kill_the_zygote(payload: bytes) -> dict:
    """A rule that leaves a ``setsid`` process and then kills its zygote (it runs under the same uid)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    with open(payload.decode(), "w") as f:
        f.write(str(proc.pid))
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)
    return {}


def test_what_a_rule_leaves_after_killing_its_zygote_is_killed_by_the_handler(tmp_path) -> None:
    from tornasole.evaluator.sandbox.zygote import Zygote

    pid_file = tmp_path / "left.pid"

    def handler() -> dict:
        confine.make_subreaper()  # as custom_rule._harden_handler does at cold start
        zygote = Zygote(kill_the_zygote, limits=confine.Limits(), reap_orphans=True).start()
        reply = zygote.run(str(pid_file).encode(), 10, 1 << 16)
        left = int(pid_file.read_text())
        zygote.stop()
        return {"reason": reply.get("reason"), "left_alive": os.path.exists(f"/proc/{left}")}

    start = time.monotonic()
    assert _in_child(handler) == {
        "reason": "the rule's process ended its sandbox's zygote",
        "left_alive": False,
    }
    assert time.monotonic() - start < 5  # noticed when the zygote died, not at the 10 s deadline
