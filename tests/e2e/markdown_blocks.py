"""Code blocks of the project's Markdown pages, and running them as a reader would.

The README and docs/GUIDE.md promise that their Python blocks run as written, in order, in one working
directory (a later block may read the trial an earlier one wrote), each pasted into a fresh interpreter
(a name a block uses without defining it fails). Their tests share these helpers.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def code_blocks(page: Path, lang: str) -> list[str]:
    """The fenced blocks of ``page`` tagged ``lang``, in order."""
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(), flags=re.S)


def shell_commands(block: str) -> list[list[str]]:
    """The commands of a shell block, continuation lines joined and comments dropped."""
    joined = block.replace("\\\n", " ")
    lines = [line.split("#", 1)[0].strip() for line in joined.splitlines()]
    return [shlex.split(line) for line in lines if line]


def run_python_blocks(page: Path, workdir: Path) -> list[dict]:
    """Run every Python block of ``page`` in ``workdir``, each in a fresh namespace, in order.

    A block that registers jobs (``register_job(``) runs inside a local mode started for it, as the page
    tells a reader to start one first. Returns each block's namespace, in order.
    """
    from tornasole.local import LocalMode, LocalSettings

    namespaces: list[dict] = []
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        for number, block in enumerate(code_blocks(page, "python"), 1):
            namespace: dict = {"__name__": "__main__"}
            code = compile(block, f"{page.name} python block {number}", "exec")
            if "register_job(" in block:
                with LocalMode(LocalSettings(port=0)):
                    exec(code, namespace)  # noqa: S102 - the page's own code
                    namespace["_job_statuses"] = {
                        name: namespace["describe"](name)["TrainingJobStatus"]
                        for name in re.findall(r'register_job\("([^"]+)"', block)
                    }
            else:
                exec(code, namespace)  # noqa: S102 - the page's own code
            namespaces.append(namespace)
    finally:
        os.chdir(cwd)
    return namespaces
