"""The store layer: everything a run keeps on disk.

`RunDirectory` owns a run directory and every file in it (settings, the run database,
samples, summary, diagnoses); `RunStore` is the run database it opens. Orchestration writes
runs through `RunDirectory`; diagnosis, reports, comparisons and leaderboards read them
through it, and nothing else knows the files' names or formats.
"""

from knowbench.store.database import STORE_FILE, RunStore
from knowbench.store.directory import RunDirectory
from knowbench.store.label import default_label, run_label

__all__ = ["STORE_FILE", "RunDirectory", "RunStore", "default_label", "run_label"]
