"""The report's figures drawn by a child process: it loads matplotlib while the parent still runs the SQL.

Loading matplotlib and drawing eleven figures take about as long as the study's queries at 100k runs;
started first, the child has matplotlib ready when the figures' tables are, and draws while the parent
computes the tables no figure needs. One child, by default: a second draws half the figures but loads
matplotlib again (seconds of CPU), which on a 2-core machine with other work costs more than it saves. A child
is a fresh interpreter (``python -m fae.report.drawing``), not a fork: DuckDB's threads are running by then.
The job goes to it and its figures come back pickled over its pipes (both ends run this same code).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import TracebackType

from fae.errors import FaeError
from fae.report.distributions import Distribution
from fae.report.scope import FIGURES, Figure
from fae.report.study import Study

SOURCE = str(Path(__file__).resolve().parents[2])  # the directory that holds the fae package


class Drawing:
    """``workers`` child processes, started now, that draw the report's figures once ``send`` gives them data."""

    def __init__(self, workers: int = 1):
        self.drawn = False
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=SOURCE + (os.pathsep + path if path else ""))
        self.children = [
            subprocess.Popen(
                [sys.executable, "-m", "fae.report.drawing"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            for _ in range(max(1, workers))
        ]
        self.pool = ThreadPoolExecutor(len(self.children))  # feeds and reads every child at once
        self.outputs: list[Future[tuple[bytes, bytes]]] = []

    def send(self, study: Study, distributions: dict[str, Distribution]) -> None:
        """Give the children the figures' data and return: they draw while this process computes the rest.

        ``study`` needs only the tables the figures read (FIGURE_TABLES); the children take the names in turn.
        """
        shares = [FIGURES[i :: len(self.children)] for i in range(len(self.children))]
        jobs = [pickle.dumps((study, distributions, share)) for share in shares]
        self.outputs = [
            self.pool.submit(child.communicate, job) for child, job in zip(self.children, jobs, strict=True)
        ]

    def figures(self) -> list[Figure]:
        """Every figure the data sent allows, in report order, once the children have drawn them."""
        outputs = [output.result() for output in self.outputs]
        self.drawn = True
        drawn: dict[str, Figure] = {}
        for child, (out, err) in zip(self.children, outputs, strict=True):
            if child.returncode != 0:  # the child's last line: its exception
                reason = (err.decode(errors="replace").strip().splitlines() or [f"exit code {child.returncode}"])[-1]
                raise FaeError(f"drawing the report's figures failed: {reason}")
            drawn.update((f.name, f) for f in pickle.loads(out))
        return [drawn[name] for name in FIGURES if name in drawn]

    def draw(self, study: Study, distributions: dict[str, Distribution]) -> list[Figure]:
        """``send`` then ``figures``."""
        self.send(study, distributions)
        return self.figures()

    def close(self) -> None:
        """Stop the children that have not drawn (the report failed before it drew)."""
        if not self.drawn:
            for child in self.children:
                if child.poll() is None:
                    child.kill()
            if self.outputs:
                wait(self.outputs)  # each feeder returns once its child is gone
            else:
                for child in self.children:
                    child.communicate()
            self.drawn = True
        self.pool.shutdown()

    def __enter__(self) -> Drawing:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def main() -> None:
    """The child: load matplotlib, then draw the figures named in the job on stdin; pickled figures to stdout."""
    from fae.report.figures import draw  # matplotlib loads now, while the parent queries

    study, distributions, names = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(draw(study, distributions, names)))
    sys.stdout.buffer.flush()
    os._exit(0)  # the figures are out: tearing down matplotlib's modules would only delay the parent


if __name__ == "__main__":
    main()
