"""A hostile rule in the sandbox, as an unprivileged uid: nothing of another job, nothing left behind.

The red-team's setup: the handler (``custom_rule.handler``, the real file) runs as uid 65534 with the
function role's keys and the runtime API's address in its environment; it starts its zygote as in
Lambda, serves job A (whose rule plants a file in ``/tmp`` and a ``setsid`` process), then job B,
whose rule tries to read job A's credentials from the handler's memory (``/proc/<pid>/mem``,
``ptrace``, ``process_vm_readv``), the role's keys from its environment, job A's files, and reports
what it got. Before: the handler's memory was readable (job A's keys in it), ptrace attached, the
planted process lived on. moto is in-process: the zygote, forked after the data below was written,
reads it through its own copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evaluator_stack import BUCKET, Stack

from tornasole.aws.clients import client
from tornasole.evaluator.models import RuleConfig
from tornasole.evaluator.sandbox.session_policy import SESSION_SECONDS, session_name
from tornasole.evaluator.sandbox.wire import SandboxRequest
from tornasole.stack_spec import ENV_CUSTOM_RULES_PREFIX

NOBODY = 65534
RULES = f"s3://{BUCKET}/custom-rules"
SOURCE = f"{RULES}/hostile.py"
ROLE_SECRET = "ROLESECRETrolesecretROLESECRET0123456789"
RUNTIME_API = "127.0.0.1:9001"

HOSTILE = b"""
import ctypes, errno, json, os, resource, subprocess, tempfile
from smdebug.rules.rule import Rule


SECRET_PREFIXES = ("AWS_ACCESS", "AWS_SECRET", "AWS_SESSION", "AWS_LAMBDA_RUNTIME")


def _ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _read_memory(pid, secret):
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read().splitlines()
        with open("/proc/%d/mem" % pid, "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("r"):
                    continue
                lo, hi = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(lo)
                    if secret.encode() in mem.read(min(hi - lo, 64 << 20)):
                        return "found"
                except (OSError, OverflowError, ValueError):
                    continue
        return "read, not found"
    except PermissionError:
        return "denied"


def _ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        libc.ptrace(17, pid, None, None)
        return "attached"
    return "denied" if ctypes.get_errno() == errno.EPERM else errno.errorcode[ctypes.get_errno()]


class _Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _vm_read(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(16)
    local, remote = _Iov(ctypes.cast(buf, ctypes.c_void_p), 16), _Iov(0x10000, 16)
    n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return "read" if n >= 0 else ("denied" if ctypes.get_errno() == errno.EPERM else "tried")


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except PermissionError:
        return "denied"


class Hostile(Rule):
    def __init__(self, base_trial, how="probe", shared="", secret="", tmp=""):
        super().__init__(base_trial)
        self.how, self.shared, self.secret, self.tmp = how, shared, secret, tmp

    def invoke_at_step(self, step):
        root = self.tmp  # what /tmp is in Lambda
        if self.how == "plant":
            for path in (os.path.join(tempfile.gettempdir(), "job-a"), os.path.join(root, "job-a-at-root")):
                with open(path, "w") as f:
                    f.write("job A's data")
            proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
            with open(os.path.join(self.shared, "planted.pid"), "w") as f:
                f.write(str(proc.pid))
            return False
        zygote = os.getppid()
        handler = _ppid(zygote)
        own = _environ(os.getpid())
        status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
        limits = {
            n: resource.getrlimit(getattr(resource, n))[0]
            for n in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_CPU")
        }
        seen = {
            "uid": os.getuid(),
            "handler_mem": _read_memory(handler, self.secret),
            "zygote_mem": _read_memory(zygote, self.secret),
            "ptrace": _ptrace(handler),
            "vm_read": _vm_read(handler),
            "env": sorted(k for k in os.environ if k.startswith(SECRET_PREFIXES)),
            "own_environ": ("ROLESECRET" in own, "9001" in own),
            "zygote_environ": _environ(zygote)[:6],
            "tmp": sorted(os.listdir(root)),
            "tmp_files": sorted(n for _, _, names in os.walk(root) for n in names),
            "nnp_seccomp": (status["NoNewPrivs"].strip(), status["Seccomp"].strip()),
            "unlimited": sorted(n for n, v in limits.items() if v == resource.RLIM_INFINITY),
        }
        raise RuntimeError("PROBE " + json.dumps(seen, sort_keys=True))
"""


def _event(job: str, how: str, shared: str, secret: str = "") -> tuple[dict[str, Any], str]:
    """A request for ``job`` with real (moto) credentials of its own; and its AccessKeyId."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    iam = client("iam")
    try:
        arn = iam.get_role(RoleName="reader")["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        arn = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    creds = client("sts").assume_role(
        RoleArn=arn, RoleSessionName=session_name(job), DurationSeconds=SESSION_SECONDS
    )["Credentials"]
    rule = RuleConfig(
        "Hostile",
        "Hostile",
        {"how": how, "shared": shared, "secret": secret, "tmp": os.path.join(shared, "tmp")},
        source_s3_uri=SOURCE,
    )
    request = SandboxRequest(
        job,
        f"s3://{BUCKET}/jobs/{job}",
        0,
        ("worker_0",),
        rule,
        {k: creds[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")},
    )
    return json.loads(request.to_bytes()), creds["AccessKeyId"]


def _handler_as_nobody(shared: str, tmp_root: str, lambda_context: Any) -> None:  # pragma: no cover - child
    """The sandbox function's process: drop to nobody, cold start, job A, then job B; replies to stdout."""
    from tornasole.evaluator.sandbox import confine
    from tornasole.lambda_support.handlers import custom_rule

    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    # a uid change leaves a process not dumpable; Lambda's runtime is exec'd as its uid, which leaves
    # it dumpable: put that back, so that the sandbox's own hardening is what the rule meets
    confine.set_dumpable(True)
    os.environ.update(
        {
            "HOME": shared,
            "AWS_ACCESS_KEY_ID": "ASIAROLEKEYROLEKEY00",
            "AWS_SECRET_ACCESS_KEY": ROLE_SECRET,
            "AWS_SESSION_TOKEN": ROLE_SECRET + "token",
            "AWS_LAMBDA_RUNTIME_API": RUNTIME_API,
            "AWS_LAMBDA_FUNCTION_NAME": "tornasole-custom-rule",
            "TORNASOLE_SANDBOX_TMP_ROOT": tmp_root,  # custom_rule.ENV_TMP_ROOT
        }
    )
    custom_rule._ZYGOTE = custom_rule._start_zygote(os.environ)  # cold start: before any event
    job_a, key_a = _event("job-a", "plant", shared)
    replies = [custom_rule.handler(job_a, lambda_context)]
    job_b, _ = _event("job-b", "probe", shared, secret=key_a)  # job A's key: still in this process
    replies.append(custom_rule.handler(job_b, lambda_context))
    with open(os.path.join(shared, "replies.json"), "w") as f:
        json.dump({"replies": replies, "handler": os.getpid(), "job_a": job_a["credentials"]}, f)
    custom_rule._ZYGOTE.stop()


@contextlib.contextmanager
def _code_reachable_by_nobody() -> Iterator[None]:
    """Let uid 65534 traverse the directories above the code it imports, for the test only.

    Why: the handler's process imports lazily after dropping to nobody, and a checkout may sit under a
    0700 directory (CI clones into ``mktemp -d``); there the child could not import and wrote no reply.
    Only the search bit (o+x) is added, to the ancestors that lack it, and taken away afterwards.
    """
    roots = {
        Path(__file__).resolve(),
        Path(sys.prefix).resolve(),
        *(Path(p).resolve() for p in sys.path if p),
    }
    changed: list[tuple[Path, int]] = []
    try:
        for d in sorted({a for r in roots for a in r.parents}):
            with contextlib.suppress(OSError):
                mode = d.stat().st_mode
                if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                    d.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
                    changed.append((d, stat.S_IMODE(mode)))
        yield
    finally:
        for d, mode in reversed(changed):
            with contextlib.suppress(OSError):
                d.chmod(mode)


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to an unprivileged uid needs root")
def test_a_hostile_rule_reads_no_other_jobs_secret_and_leaves_nothing(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, lambda_context: Any
) -> None:
    monkeypatch.setenv(ENV_CUSTOM_RULES_PREFIX, RULES)
    client("s3").put_object(Bucket=BUCKET, Key="custom-rules/hostile.py", Body=HOSTILE)
    for job in ("job-a", "job-b"):
        stack.write_collections(trial=f"s3://{BUCKET}/jobs/{job}")
        stack.write_step(0, trial=f"s3://{BUCKET}/jobs/{job}")
    shared = tempfile.mkdtemp(prefix="tornasole-sandbox-")
    tmp_root = os.path.join(shared, "tmp")
    os.mkdir(tmp_root)
    for d in (shared, tmp_root):
        os.chown(d, NOBODY, NOBODY)
    try:
        with _code_reachable_by_nobody():
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the handler's process
                code = 1
                try:
                    _handler_as_nobody(shared, tmp_root, lambda_context)
                    code = 0
                except BaseException:  # the test's failure shows why the handler's process stopped
                    traceback.print_exc()
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 120
            while not os.waitpid(pid, os.WNOHANG)[0]:
                assert time.monotonic() < deadline, "the handler's process did not finish"
                select.select([], [], [], 0.05)
        with open(os.path.join(shared, "replies.json")) as f:
            out = json.load(f)
        planted, probe = out["replies"]
        assert planted["kind"] in ("no_issue", "skipped"), planted
        seen = json.loads(probe["reason"].split("PROBE ", 1)[1])
        assert seen == {
            "uid": NOBODY,
            "handler_mem": "denied",
            "zygote_mem": "denied",
            "ptrace": "denied",
            "vm_read": "denied",
            "env": [],
            "own_environ": [False, False],
            "zygote_environ": "denied",
            "tmp": seen["tmp"],  # checked below: its own TMPDIR only
            "tmp_files": [],
            "nnp_seccomp": ["1", "2"],
            "unlimited": [],
        }
        assert len(seen["tmp"]) == 1
        assert seen["tmp"][0].startswith("rule-")
        with open(os.path.join(shared, "planted.pid")) as f:
            assert _gone(int(f.read()))  # the setsid process job A's rule left was killed with its run
        assert os.listdir(tmp_root) == []  # wiped after the last run
    finally:
        shutil.rmtree(shared, ignore_errors=True)
