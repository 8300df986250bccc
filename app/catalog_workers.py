"""A catalog's models planned in worker processes, beside the UI.

The picker used to plan its rows in a thread, which shares one GIL with the UI thread that draws the rows
as they come: on a first start with a hundred models each slowed the other, and one core did all the work
(`vramchat --list` planned on one core too: both plan through app.catalog's `Catalog.planned`). A worker
makes each summary as the calling process would (app.model_summary).
Worker processes leave the UI thread its own interpreter and plan on every core. Each is a plain child
(`python -m app.catalog_workers`): told its models and the devices on stdin, it answers a line a model on
stdout, its stderr discarded (the terminal is the app's). A worker's start (an interpreter and the planner's
imports, about a quarter of a second) is repaid only over many models, so a short list is still planned in
the calling thread.
"""

from __future__ import annotations

import json
import os
import pickle
import selectors
import subprocess
import sys
from collections.abc import Generator

from app.caches.plans import ModelSummary
from planner.hardware import Device, Host

WORKERS_SWITCH = "VRAMCHAT_PLAN_WORKERS"  # how many worker processes; 0 plans in the calling thread
MODELS_PER_WORKER = 24  # fewer models than this for each worker and its start is not repaid
MAX_WORKERS = 4


def worker_count(models: int) -> int:
    """Worker processes for planning `models` models: none (the calling thread plans them) for a short list
    or a single core, else one per core up to MAX_WORKERS, at least MODELS_PER_WORKER models each.
    VRAMCHAT_PLAN_WORKERS sets the number."""
    asked = os.environ.get(WORKERS_SWITCH, "").strip()
    if asked.isdigit():
        return min(int(asked), models)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    count = min(cores, MAX_WORKERS, models // MODELS_PER_WORKER)
    return count if count >= 2 else 0


def summaries_in_workers(
    paths: list[str], gpus: list[Device], host: Host, workers: int
) -> Generator[tuple[int, ModelSummary | None], None, None]:
    """(index in `paths`, its summary) as the workers finish each, in the order they finish; worker k plans
    paths k, k + workers, ... (the list's order, roughly). A worker that died (a native crash, killed for
    memory) or answered nonsense gives None for each path it left: the caller plans those itself. Closing the
    generator (a scan cancelled) ends the workers."""
    selector = selectors.DefaultSelector()
    started: list[subprocess.Popen[bytes]] = []
    answered: set[int] = set()
    try:
        for k in range(workers):
            mine = list(range(k, len(paths), workers))
            worker = subprocess.Popen(
                [sys.executable, "-m", "app.catalog_workers"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            started.append(worker)
            assert worker.stdin is not None and worker.stdout is not None
            try:
                worker.stdin.write(pickle.dumps(([paths[i] for i in mine], gpus, host)))
                worker.stdin.close()
            except OSError:  # it died at once: its paths come back as None below
                continue
            selector.register(worker.stdout.fileno(), selectors.EVENT_READ, (mine, bytearray()))
        while selector.get_map():
            for key, _ in selector.select():
                mine, pending = key.data
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                pending += chunk
                *lines, rest = pending.split(b"\n")
                pending[:] = rest
                for line in lines:
                    answer = _answer(line, mine)
                    if answer is not None and answer[0] not in answered:
                        answered.add(answer[0])
                        yield answer
        for index in range(len(paths)):
            if index not in answered:
                yield index, None
    finally:
        selector.close()
        for worker in started:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            if worker.stdout is not None:
                worker.stdout.close()


def _answer(line: bytes, mine: list[int]) -> tuple[int, ModelSummary] | None:
    """A worker's line, "<its index>\\t<the summary as JSON>", as (index in the caller's list, summary)."""
    try:
        local, text = line.split(b"\t", 1)
        return mine[int(local)], ModelSummary.from_json(json.loads(text))
    except (ValueError, IndexError, TypeError, KeyError):
        return None


def main() -> None:
    """A worker: plan each path it is told, a line each as it goes."""
    from app.model_summary import summarize

    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed goes where stderr goes (nowhere), not into the answers
    sys.stdout = sys.stderr
    paths, gpus, host = pickle.load(sys.stdin.buffer)
    for index, path in enumerate(paths):
        summary = summarize(path, gpus, host)
        answers.write(f"{index}\t".encode() + json.dumps(summary.to_json()).encode() + b"\n")
        answers.flush()


if __name__ == "__main__":
    main()
