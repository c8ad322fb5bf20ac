"""What the benchmark scripts share (imported as a sibling: run them as
``python benchmarks/<script>.py``)."""

import json
import subprocess
import sys

from threadpoolctl import threadpool_info


def blas_kernels():
    """The BLAS libraries loaded in this process and the kernel each runs (e.g.
    ``('openblas', 'Haswell')``), sorted."""
    return sorted({(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()},
                  key=str)


def run_child(code, *args):
    """Run ``code`` in a fresh Python process with ``args`` as its argv; return the JSON
    object printed on its last line of output."""
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])
