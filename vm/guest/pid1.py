"""PID 1 of the test-kernels guest, after vm/init's switch_root.

Sets up the environment, starts vm/guest/run_groups.py as a child and reaps every process until that
child ends (orphans of the tests are re-parented to PID 1, and must not linger as zombies that the
tests' leftover-process checks would see), then powers the machine off.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

ENV = {
    "PATH": "/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "PYTHONUNBUFFERED": "1",
}


def power_off() -> None:
    os.sync()
    with open("/proc/sysrq-trigger", "w") as trigger:
        trigger.write("o")
    time.sleep(30)


def main() -> None:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # /fecbench
    os.environ.clear()
    os.environ.update(ENV)
    # The checkout is vm/test-kernels' snapshot; the venv's editable install points at the original
    # checkout on the host, so the snapshot must come first on the path.
    os.environ["PYTHONPATH"] = repo
    os.chdir(repo)
    socket.sethostname("fecbench-vm")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False)
    runner = os.fork()
    if runner == 0:
        try:
            os.execv(sys.executable, [sys.executable, os.path.join(repo, "vm", "guest", "run_groups.py")])
        finally:
            os._exit(127)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == runner:
            print(f"fecbench-pid1: runner exited with status {os.waitstatus_to_exitcode(status)}", flush=True)
            break
    power_off()


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:  # noqa: BLE001 - PID 1 must never exit: say why, then power off
        print(f"FECBENCH-GUEST-FAILED: pid1: {exc!r}", flush=True)
        power_off()
