"""Recording on Ray next to recording locally, side by side in one run, and the merge's cost per run.

    uv run python bench/bench_ray_record.py --variations 16

Local: one process, ``--concurrency`` runs at once. Ray: a two-node cluster on this machine
(ray.cluster_utils, one CPU per node), one actor per node, the same concurrency per actor.
Wall times include each mode's start-up (actors import fae and open their stacks); the merge of
the shards is timed apart from the wall time that includes it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

from fae import api
from fae.store import merge

TASK = "builtin-create-patient"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variations", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    with tempfile.TemporaryDirectory(prefix="fae-bench-") as folder:
        local_log = Path(folder) / "local.duckdb"
        started = time.monotonic()
        api.record(
            local_log,
            api.run_specs([TASK], variations=range(args.variations)),
            api.RecordConfig(concurrency=args.concurrency),
        )
        local_s = time.monotonic() - started

        node = {"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024, "temp_dir": str(Path(folder) / "ray")}
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        cluster.add_node(**node)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        merged_s = []
        original = merge.merge_logs

        def timed_merge(*a, **k):
            begun = time.monotonic()
            try:
                return original(*a, **k)
            finally:
                merged_s.append(time.monotonic() - begun)

        import fae.harness.ray_record as ray_record

        ray_record.merge_logs = timed_merge
        try:
            ray_log = Path(folder) / "ray.duckdb"
            started = time.monotonic()
            result = api.record(
                ray_log,
                api.run_specs([TASK], variations=range(args.variations)),
                api.RecordConfig(execution=api.Execution(ray="auto", ray_actors=2), concurrency=args.concurrency),
            )
            ray_s = time.monotonic() - started
        finally:
            ray.shutdown()
            cluster.shutdown()
        runs = args.variations
        print(f"runs: {runs}; ray statuses: {dict(result.statuses)}")
        print(f"local, 1 process: {local_s:.1f} s wall, {runs / local_s:.2f} runs/s")
        print(f"ray, 2 nodes x 1 actor: {ray_s:.1f} s wall, {runs / ray_s:.2f} runs/s ({local_s / ray_s:.2f}x local)")
        print(f"merge of the shards: {sum(merged_s):.2f} s, {1000 * sum(merged_s) / runs:.1f} ms per run")
        for name, log in (("local", local_log), ("ray", ray_log)):
            rows = api.query(
                log,
                "SELECT median(epoch(ended_at) - epoch(started_at)) AS run_s,"
                " epoch(max(ended_at)) - epoch(min(started_at)) AS span_s FROM runs",
            )
            print(f"{name}: median run {rows[0]['run_s']:.2f} s, first start to last end {rows[0]['span_s']:.1f} s")
        print(
            f"log size: local {local_log.stat().st_size / runs / 1024:.1f} KiB/run, "
            f"ray {ray_log.stat().st_size / runs / 1024:.1f} KiB/run"
        )
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
