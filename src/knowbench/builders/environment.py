"""The benchmark's environment (stage 5 of `knowbench mine`): the mined distributions and
the third-party packages its tests and contexts import, pinned to what got installed."""

from __future__ import annotations

from knowbench.builders.build_log import BuildReport
from knowbench.builders.candidates import Draft
from knowbench.builders.options import Progress
from knowbench.builders.requirements import (
    distribution_for,
    import_roots,
    installable_subset,
    requirement_name,
    third_party,
)
from knowbench.builders.source import Source
from knowbench.errors import UserError
from knowbench.execution.environments import BenchEnv, ensure_env


def build_environment(sources: list[Source], drafts: list[Draft], report: BuildReport,
                      say: Progress) -> BenchEnv:
    """Build the benchmark's environment: the mined distributions plus what tests import.

    Requirements that cannot be installed are left out and recorded in `report`; the rest
    are pinned to the versions installed. Raises `UserError` when a mined distribution
    itself cannot be installed.
    """
    own_tops: set[str] = set()
    for source_report in report.sources:
        own_tops |= set(source_report.library_packages)
    roots: set[str] = set()
    for draft in drafts:
        for code in (draft.task.context, draft.task.prompt_code, *(spec.code for spec in draft.task.tests)):
            roots |= import_roots(code, required_only=True)
    extra = sorted({distribution_for(root) for root in third_party(roots - own_tops)} -
                   {requirement_name(s.name) for s in sources} - {"pytest"},
                   key=str.lower)
    base = [source.requirement for source in sources]
    say(f"environment: {', '.join(base)}" + (f" + test dependencies {', '.join(extra)}" if extra else ""))
    kept, refused = installable_subset([*base, *extra])
    missing = [requirement for requirement in base if requirement in refused]
    if missing:
        raise UserError(f"the mined package itself cannot be installed ({', '.join(missing)}):\n"
                        f"{refused[missing[0]]}")
    for requirement, why in refused.items():
        report.uninstallable.append({"requirement": requirement, "error": why[-300:]})
    kept = [requirement for requirement in kept if requirement not in base]
    try:
        env = ensure_env([*base, *kept])
    except UserError:  # resolvable, yet some package does not build here: find which
        installable = []
        for requirement in kept:
            try:
                ensure_env([*base, requirement])
                installable.append(requirement)
            except UserError as error:
                report.uninstallable.append({"requirement": requirement, "error": str(error)[-300:]})
        kept = installable
        env = ensure_env([*base, *kept])
    installed = {requirement_name(n): (n, v) for n, v in env.info()["installed"].items()}
    pinned = []
    for requirement in [*base, *kept]:
        if "@" in requirement or "==" in requirement:
            pinned.append(requirement)
            continue
        found = installed.get(requirement_name(requirement))
        pinned.append(f"{found[0]}=={found[1]}" if found else requirement)
    report.requirements = pinned
    env = ensure_env(pinned)
    report.environment = {"key": env.key, "python": env.info()["python"], "installed": env.info()["installed"]}
    return env
