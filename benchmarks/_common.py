"""What the benchmark scripts share (imported as a sibling: run them as
``python benchmarks/<script>.py``)."""

import json
import os
import platform
import subprocess
import sys

from threadpoolctl import threadpool_info


def blas_kernels():
    """The BLAS libraries loaded in this process and the kernel each runs (e.g.
    ``('openblas', 'Haswell')``), sorted."""
    return sorted({(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()},
                  key=str)


def cpu_model():
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine():
    """What a result file records of the machine: CPU model, cores and BLAS kernels (call
    it after the libraries timed are imported)."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "blas": blas_kernels()}


def run_child(code, *args):
    """Run ``code`` in a fresh Python process with ``args`` as its argv; return the JSON
    object printed on its last line of output."""
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


class Steal:
    """The share of the machine's CPU time its hypervisor took (``steal`` in
    ``/proc/stat``) while the block ran: on a shared virtual machine the timings of a run
    with much steal mean little. ``share`` is None where ``/proc/stat`` does not say."""

    @staticmethod
    def _times():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return fields[7] if len(fields) > 7 else None, sum(fields[:8])

    def __enter__(self):
        self.start, self.share = self._times(), None
        return self

    def __exit__(self, *exc):
        end = self._times()
        if self.start and end and None not in (self.start[0], end[0]) and end[1] > self.start[1]:
            self.share = (end[0] - self.start[0]) / (end[1] - self.start[1])
