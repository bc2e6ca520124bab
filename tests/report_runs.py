"""Four real replay runs of examples/basic, for the report's browser checks and its screenshot.

Each run replays a samples file through `knowbench run --model replay:FILE --label ...`
(the real command, sandbox and engine): the scripted failures below make the four models
differ, and their labels are long on purpose, as real ones are, so the report has to fit them.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

from helpers import run_knowbench
from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import ChoiceTask, FunctionTask

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "basic"

# Code that fails in a known way, per task: (the label it is diagnosed as, the code).
SCRIPTED_FAILURES = {
    "text/slugify": ("WrongImport", "from unidecode import unidecode\n\ndef slugify(text, separator='-'):\n"
                     "    return re.sub(r'[^a-z0-9]+', separator, unidecode(text).lower()).strip(separator)\n"),
    "text/wrap_paragraphs": ("WrongParam", "def wrap_paragraphs(text, width=40):\n"
                             "    return textwrap.fill(text, width=width, break_long=False)\n"),
    "text/TemplateRenderer.render": ("WrongAPISelection", "def render(self, template, **values):\n"
                                     "    return string.Template(template).substitute({**self.defaults, **values})\n"),
    "datetime/to_utc": ("WrongShapeDtype", "def to_utc(stamp, offset_minutes=None):\n"
                        "    moment = datetime.strptime(stamp, '%Y-%m-%dT%H:%M:%S')\n"
                        "    if offset_minutes is None:\n        raise ValueError('naive')\n"
                        "    moment = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))\n"
                        "    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat() + 'Z'\n"),
    "datetime/add_business_days": ("WrongLogic", "def add_business_days(start, days, holidays=()):\n"
                                   "    return start + timedelta(days=days)\n"),
    "data/Settings.to_json": ("WrongSyntax", "def to_json(self):\n    return json.dumps(self.data,\n"),
    "algorithms/grade": ("Timeout", "def grade(score, breakpoints=(60, 70, 80, 90), grades='FDCBA'):\n"
                         "    index = 0\n    while index < len(breakpoints) and score >= breakpoints[index]:\n"
                         "        continue\n    return grades[bisect.bisect_right(breakpoints, score)]\n"),
    "data/Inventory.top": ("WrongAPISelection", "def top(self, n):\n    return self._counts.top_items(n)\n"),
}

# (samples file, label, how many of the scripted failures the model makes, choice answers right)
MODELS = (
    ("gpt-4o-mini-2024-07-18.jsonl", "gpt-4o-mini-2024-07-18 · no knowledge · greedy", 2, True),
    ("qwen2.5-coder-7b-instruct.jsonl", "Qwen2.5-Coder-7B-Instruct · rag-bm25 top-5 · greedy", 5, True),
    ("deepseek-coder-6.7b-instruct.jsonl", "deepseek-coder-6.7b-instruct · no knowledge · greedy", 7, False),
    ("llama-3.1-8b-instruct.jsonl", "Llama-3.1-8B-Instruct · oracle Full bundle · greedy", 8, False),
)


def _replay_file(path: Path, failures: int, choices_right: bool) -> Path:
    bench = load_benchmark(EXAMPLE)
    failing = list(SCRIPTED_FAILURES)[:failures]
    with path.open("w") as handle:
        for task in bench.tasks:
            if isinstance(task, FunctionTask):
                code = SCRIPTED_FAILURES[task.task_id][1] if task.task_id in failing else task.reference
                completion = f"Here it is:\n```python\n{code}```\n"
            else:
                assert isinstance(task, ChoiceTask)
                letters = task.answer if choices_right else [
                    next(x for x in task.options if x not in task.answer)]
                completion = f"Answer: {', '.join(letters)}"
            handle.write(json.dumps({"task_id": task.task_id, "sample_idx": 0,
                                     "completion": completion}) + "\n")
    return path


def four_replay_runs(base: Path) -> list[Path]:
    """Run the four replay models on examples/basic into `base`/<n>; returns the run dirs.
    An existing finished run is resumed (nothing is redone)."""
    base.mkdir(parents=True, exist_ok=True)
    runs = []
    for index, (file, label, failures, choices_right) in enumerate(MODELS):
        samples = _replay_file(base / file, failures, choices_right)
        run_dir = base / f"run-{index + 1}"
        done = run_knowbench("run", str(EXAMPLE), "--model", f"replay:{samples}", "--label", label,
                             "--out", str(run_dir), "--workers", "2", "--engine", "subprocess")
        if done.returncode != 0:
            raise RuntimeError(f"knowbench run failed for {label}:\n{done.stderr[-3000:]}")
        runs.append(run_dir)
    return runs


# ---------------------------------------------------------------------------- in the browser

CHROMIUM = Path("/usr/bin/chromium")

# Measures the laid-out page and replaces nothing: the result is appended as JSON in a <pre>.
_MEASURE = """<script>
const result = {page: {scroll: document.documentElement.scrollWidth,
                       client: document.documentElement.clientWidth},
                containers: [], clipped: []};
for (const box of document.querySelectorAll("div.wide")) {
  result.containers.push({section: box.closest("section").id, scroll: box.scrollWidth,
                          client: box.clientWidth,
                          table: Math.ceil(box.querySelector("table").getBoundingClientRect().width)});
}
for (const svg of document.querySelectorAll("figure svg")) {
  const frame = svg.getBoundingClientRect();
  for (const text of svg.querySelectorAll("text")) {
    const b = text.getBoundingClientRect();
    if (b.width && (b.left < frame.left - 1 || b.right > frame.right + 1 ||
                    b.top < frame.top - 1 || b.bottom > frame.bottom + 1)) {
      result.clipped.push({chart: svg.id, text: text.textContent,
                           overflow: [frame.left - b.left, b.right - frame.right,
                                      frame.top - b.top, b.bottom - frame.bottom].map(Math.round)});
    }
  }
}
const out = document.createElement("pre");
out.id = "kb-measure";
out.textContent = JSON.stringify(result);
document.body.appendChild(out);
</script>"""


def chromium(*arguments: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with a throw-away profile and no background traffic."""
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def measure(report: Path, workdir: Path, width: int = 1400) -> dict:
    """Lay the report out at `width` CSS pixels and return the page's and every table
    container's scrollWidth / clientWidth, and any chart text drawn outside its chart.
    The report itself has no script; the measuring script goes into a copy in `workdir`."""
    copy = workdir / "measured.html"
    copy.write_text(report.read_text().replace("</body>", _MEASURE + "</body>"))
    done = chromium(f"--window-size={width},1200", "--dump-dom", copy.as_uri(), profile=workdir / "profile")
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    found = re.search(r'<pre id="kb-measure">(.*?)</pre>', done.stdout, re.DOTALL)
    if not found:
        raise RuntimeError("the measuring script did not run:\n" + done.stdout[-2000:])
    return json.loads(html.unescape(found[1]))


def screenshot(report: Path, png: Path, workdir: Path, width: int = 1400, height: int = 2400) -> Path:
    """A PNG of the report's first `height` pixels at `width` CSS pixels."""
    done = chromium(f"--screenshot={png}", f"--window-size={width},{height}", report.as_uri(),
                    profile=workdir / "profile-shot")
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(done.stderr[-2000:])
    return png
