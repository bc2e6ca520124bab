"""Running a project sample's tests with pytest, inside the sandbox; stdlib only until pytest.

The engine has laid out the project's copy, with the candidate's code in place, in the
sample's work directory (`config["project"]["dir"]`). A request without project tests (a
snippet run in the copy) only `enter`s it and runs as any in-process sample. This runs the listed tests there with
the environment's own pytest (so the project's conftest.py, its fixtures and plugins such as
pytest-asyncio work as in the project), maps each pytest node id to a test item (a
parametrized test's cases are one item, which passes when every case passes) and reports
one record per item, carrying the nonce, as the runner does. A test that pytest could not
collect (its file fails to import) is reported with the collection error.

The candidate's code runs in this process, as the project's tests import it: a project
sample is judged in-process, without the integrity checks of `knowbench_runner` (they
watch the runner's own pytest emulation, which is not used here).
"""

import json
import os
import sys

_MESSAGE_CAP = 4000


def run(config, result_fd, set_limits, drop_privileges, confine):
    """Run the project's tests and report; ends the process. `confine` installs every
    sample's seccomp filter, as for any other sample."""
    nonce = config["nonce"]
    items = [item["id"] for item in config["items"]]
    project = config["project"]
    write = os.write

    def report(fields):
        data = (json.dumps({**fields, "nonce": nonce}) + "\n").encode()
        while data:
            data = data[write(result_fd, data):]

    here = enter(project)
    try:
        import pytest
    except ImportError as error:
        for item in items:
            report({"item": item, "status": "error", "reason": "test-code-failed", "duration_s": 0.0,
                    "message": f"pytest is not installed in the benchmark's environment: {error}"})
        _finish(report)
    set_limits(config["limits"], config.get("nproc_base"))
    drop_privileges(config.get("uid"), config.get("gid"))
    confine()
    reporter = _Reporter(items, report)
    args = ["-p", "no:cacheprovider", "-o", "addopts=", "-q", "--rootdir", here, "--tb=short",
            "-W", "ignore::DeprecationWarning", *project["tests"]]
    code = None
    try:
        code = pytest.main(args, plugins=[reporter])
    finally:
        reporter.finish(code)
        _finish(report)


def enter(project):
    """Work in the project's copy: its workdir the current directory, its python_path first
    on sys.path. Returns the workdir."""
    os.chdir(project["dir"])
    here = os.getcwd()
    for entry in reversed(project.get("python_path", ["."])):
        sys.path.insert(0, os.path.normpath(os.path.join(here, entry)))
    return here


def _finish(report):
    report({"done": True})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def item_of(nodeid):
    """The test item a pytest node id belongs to: the id less a parametrization suffix."""
    if nodeid.endswith("]") and "[" in nodeid:
        return nodeid[:nodeid.index("[")]
    return nodeid


class _Reporter:
    """A pytest plugin: reports each item once all of its cases are done."""

    def __init__(self, items, report):
        self.items = list(items)
        self.wanted = set(items)
        self.report = report
        self.cases = {}  # item -> cases collected and not yet finished
        self.outcome = {}  # item -> (status, reason, message) of its first failure
        self.duration = {}
        self.started = set()
        self.done = set()
        self.collect_errors = []

    def pytest_collection_modifyitems(self, session, config, items):
        for case in items:
            key = item_of(case.nodeid)
            self.cases[key] = self.cases.get(key, 0) + 1

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append((report.nodeid, _text(report)))

    def pytest_runtest_logstart(self, nodeid, location):
        key = item_of(nodeid)
        if key in self.wanted and key not in self.started:
            self.started.add(key)
            self.report({"start": key})

    def pytest_runtest_logreport(self, report):
        key = item_of(report.nodeid)
        if key not in self.wanted or key in self.done:
            return
        self.duration[key] = self.duration.get(key, 0.0) + float(report.duration or 0.0)
        if key not in self.outcome:
            if report.failed:
                crash = getattr(report.longrepr, "reprcrash", None)
                assertion = crash is not None and str(crash.message).startswith(
                    ("AssertionError", "assert "))
                status, reason = ("fail", "assertion") if assertion and report.when == "call" else (
                    "error", "exception")
                self.outcome[key] = (status, reason, f"{report.when}: {_text(report)}")
            elif report.skipped and not hasattr(report, "wasxfail"):
                self.outcome[key] = ("error", "skipped", f"skipped: {_text(report)}")
        if report.when == "teardown":
            self.cases[key] = self.cases.get(key, 1) - 1
            if self.cases[key] <= 0:
                self._emit(key)

    def _emit(self, key):
        self.done.add(key)
        status, reason, message = self.outcome.get(key, ("pass", None, ""))
        fields = {"item": key, "status": status, "message": message[-_MESSAGE_CAP:],
                  "duration_s": round(self.duration.get(key, 0.0), 4)}
        if reason is not None:
            fields["reason"] = reason
        self.report(fields)

    def finish(self, code=None):
        """Items pytest never ran: failed, with the collection errors when there were any."""
        stopped = int(code) if code is not None else None
        why = "; ".join(f"{nodeid or 'session'}: {text}" for nodeid, text in self.collect_errors)
        for key in self.items:
            if key in self.done:
                continue
            self.done.add(key)
            message = ("the test started and pytest stopped before it ended" if key in self.started
                       else f"not collected: {why}" if why else
                       f"pytest stopped (exit code {stopped}) before collecting any test; its "
                       "error is on stderr (a conftest.py that fails to load, a bad option)"
                       if stopped in (2, 3, 4) else
                       "pytest did not collect this test (it is not in the project's test file)")
            self.report({"item": key, "status": "error", "reason": "test-code-failed",
                         "message": message[-_MESSAGE_CAP:], "duration_s": 0.0})


def _text(report):
    try:
        return str(report.longreprtext or report.longrepr or "")
    except Exception:
        return "(the failure could not be formatted)"
