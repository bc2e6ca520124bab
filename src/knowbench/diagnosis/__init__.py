"""Diagnosis: why each failed sample of a stored run failed.

A step after scoring that may touch the world: it reads a run through `RunDirectory`,
labels failures with the pure classifier (`knowbench.scoring.taxonomy`), optionally imports
the samples' packages in a separate process (`--introspect`) and asks a model about the
ambiguous cases (`judge`), and stores the labels as the run's `diagnoses.jsonl`.
"""

from knowbench.diagnosis.runs import diagnose_run, load_diagnoses, write_diagnoses

__all__ = ["diagnose_run", "load_diagnoses", "write_diagnoses"]
