"""``fae rejudge --ray``: the shards of a log judged as Ray tasks, their verdicts written by the one driver.

The same shards and the same ``judge_shard`` as ``--workers`` (fae/judge/parallel.py), each a Ray task
instead of a pool process. A task opens the log read-only, so every node must see it at the same path
(shared storage); it spills its verdict rows to Parquet in a folder of its own node and returns the files'
bytes through Ray's object store. The driver puts them where ``insert_verdicts`` reads a local worker's
files, and inserts them all in one transaction, as the local path does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fae.errors import JudgeError
from fae.judge.parallel import (
    RUNS_PER_WORKER,
    ShardJob,
    ShardResult,
    judge_shard,
    run_shards,
    spool_folder,
    workers_default,
)
from fae.util.ray_cluster import cluster_cpus, ray_connection, short_error


def ray_workers(ray: Any, runs: int) -> int:
    """One task per CPU of the cluster, but no more than one per ``RUNS_PER_WORKER`` runs."""
    return max(1, min(cluster_cpus(ray), runs // RUNS_PER_WORKER))


def judge_shard_here(job: ShardJob) -> tuple[ShardResult, list[bytes]]:
    """Judge one shard on this node; its verdict rows come back as the bytes of its Parquet files."""
    if job.out is None:
        return judge_shard(job), []
    with spool_folder("ray-judge") as spool:
        stem = Path(spool) / "shard"
        result = judge_shard(replace(job, out=str(stem)))
        return result, [part.read_bytes() for part in sorted(stem.parent.glob(stem.name + "-*.parquet"))]


def run_shards_on_ray(ray: Any, jobs: Sequence[ShardJob]) -> list[ShardResult]:
    """Judge every shard as a Ray task (one CPU each); each shard's files land at its ``out`` stem here."""
    task = ray.remote(num_cpus=1, max_retries=0)(judge_shard_here)
    try:
        answers = ray.get([task.remote(job) for job in jobs])
    except ray.exceptions.RayError as exc:
        raise JudgeError(
            f"a judging task on the Ray cluster failed ({short_error(exc)}); no verdict was written"
        ) from None
    results = []
    for job, (result, parts) in zip(jobs, answers, strict=True):
        for index, data in enumerate(parts):
            Path(f"{job.out}-{index:05d}.parquet").write_bytes(data)
        results.append(result)
    return results


def judge_jobs(
    make_jobs: Callable[[int], list[ShardJob]],
    runs: int,
    *,
    workers: int | None,
    ray: str | None,
    command: str,
    events: int | None = None,
) -> tuple[list[ShardJob], list[ShardResult]]:
    """Cut ``runs`` runs into shards (``make_jobs(count)``) and judge them: on ``workers`` local processes
    (default every core), or as tasks on the Ray cluster at ``ray`` (default one per CPU of the cluster)."""
    if ray is None:
        count = workers or workers_default(runs, events=events)
        jobs = make_jobs(count)
        return jobs, run_shards(jobs, count)
    with ray_connection(ray, command) as cluster:
        jobs = make_jobs(workers or ray_workers(cluster, runs))
        return jobs, run_shards_on_ray(cluster, jobs)
