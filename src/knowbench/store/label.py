"""A run's label: the name reports, leaderboards and comparisons show for it.

`knowbench run --label TEXT` stores TEXT as run.json "label", beside the settings and not
in them: relabelling a run changes no result, so a run resumes under a new label. Without
--label (and for runs stored before labels existed) the label is made from the settings:
the model, with the samples file's name for a replay backend, and the method, e.g.
"gpt-4o-mini · rag-bm25" or "replay:gpt-4o-mini.jsonl · none".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def default_label(settings: Mapping[str, Any]) -> str:
    """"<model> · <method>"; a replay model is "replay:<samples file name>"."""
    model = settings.get("model", {})
    name = str(model.get("model") or model.get("backend") or "?")
    file = model.get("file") or (str(model["path"]).replace("\\", "/").rsplit("/", 1)[-1]
                                 if model.get("backend") == "replay" and model.get("path") else "")
    if file:
        name = f"{name}:{file}"
    return f"{name} · {settings.get('method', {}).get('method', '?')}"


def run_label(document: Mapping[str, Any]) -> str:
    """The label of a run from its run.json document: "label", else `default_label`."""
    label = document.get("label")
    if isinstance(label, str) and label.strip():
        return label.strip()
    return default_label(document.get("settings", {}))
