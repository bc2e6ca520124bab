"""Runs one shell command in the sandbox under a sample's limits; stdlib only.

Started by `knowbench.execution.shell` as `python -I -c BOOT DIR` with a JSON configuration
on stdin (`command`, `limits`, `nproc_base`, `uid`, `gid`): it reads the configuration,
points stdin at /dev/null, sets the rlimits the test runner sets (`knowbench_limits`),
drops to the sample's uid, installs the samples' seccomp filter (`knowbench_seccomp`) and
execs `bash -c COMMAND` with stderr joined to stdout. The rlimits and the filter hold for
bash and everything it starts; the engine side kills the whole process group at the
wall-clock limit and when the processes pass the memory budget or the process limit, and
caps the output it reads.
"""

import json
import os
import sys

import knowbench_limits
import knowbench_seccomp


def main():
    config = json.loads(sys.stdin.buffer.read())
    knowbench_limits.fresh_signals(python=False)  # bash starts as from a terminal
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    knowbench_limits.set_limits(config["limits"], config.get("nproc_base"))
    knowbench_limits.drop_privileges(config.get("uid"), config.get("gid"))
    knowbench_seccomp.install("sample")  # as every sample's process: it survives the exec
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(1, 2)
    os.execvp("bash", ["bash", "-c", config["command"]])


if __name__ == "__main__":
    main()
