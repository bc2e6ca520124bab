"""hit@k of a RAG method over a benchmark: which tasks' helpful APIs retrieval finds.

Builds each function task's prompt with the method (no model is called, nothing is executed)
and prints, per task, whether a retrieved chunk documents or defines one of the APIs the task
is diagnosed against (`knowledge_apis`, else `target_api`), the rank and the chunk, then the
total. Tasks with nothing to look for are listed with the trace's note, if any. This is a
report, not a test: nothing is asserted.

    knowbench mine isodate==0.7.2 --domain time --out /tmp/isodate
    knowbench corpus build isodate==0.7.2 --pypi --name isodate
    .venv/bin/python bench/hit_at_k.py /tmp/isodate isodate --top-k 5
"""

from __future__ import annotations

import argparse

from knowbench.benchmark.load import load_benchmark
from knowbench.benchmark.schema import FunctionTask
from knowbench.methods import get_method
from options import count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmark")
    parser.add_argument("corpus", help="a corpus name or directory")
    parser.add_argument("--method", default="rag-bm25")
    parser.add_argument("--top-k", type=count(1), default=5)
    parser.add_argument("--query", default="signature+instruction")
    args = parser.parse_args()
    bench = load_benchmark(args.benchmark)
    method = get_method(args.method, corpus=args.corpus, top_k=args.top_k, budget=2000, query=args.query)
    diagnosed = hits = 0
    for task in bench.tasks:
        if not isinstance(task, FunctionTask):
            continue
        trace = method.prompt(task).trace
        if "hit_at_k" not in trace:
            print(f"{task.task_id}: nothing to look for {trace.get('apis_note', '')}".rstrip())
            continue
        diagnosed += 1
        hits += bool(trace["hit_at_k"])
        rank = trace["hit_rank"]
        chunk = trace["retrieved"][rank - 1]["name"] if rank else "-"
        print(f"{task.task_id}: hit={trace['hit_at_k']} rank={rank} chunk={chunk} "
              f"apis={', '.join(trace['knowledge_apis'])}")
    print(f"hit@{args.top_k}: {hits} of {diagnosed} tasks with APIs to look for "
          f"({len(bench.tasks)} tasks)")


if __name__ == "__main__":
    main()
