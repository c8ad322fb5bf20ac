"""A fitted model keeps working in forked children: os.fork, multiprocessing's fork and
forkserver start methods and a Pool (GNU OpenMP's team does not survive a fork; each case
runs in a subprocess, so that a hang fails the test instead of the suite)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")

SETUP = """
import multiprocessing as mp
import os
import numpy as np
from sktransformer import TransformerKMeans

X = np.random.default_rng(0).normal(size=(20000, 16))
km = TransformerKMeans(8, random_state=0).fit(X)  # (the parent's OpenMP team started)
labels, score = km.predict(X), km.score(X)


def work(rows):
    fitted = TransformerKMeans(8, random_state=0).fit(X)
    return (np.array_equal(km.predict(X[rows]), labels[rows]),
            np.array_equal(fitted.labels_, km.labels_),
            np.allclose(km.transform(X[rows]), km.transform(X[rows])),
            km.score(X) == score)
"""


def _run(body, tmp_path):
    script = tmp_path / "forked.py"  # (a file: forkserver's children import it)
    script.write_text(SETUP + textwrap.dedent(body))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_os_fork_child_fits_and_predicts(tmp_path):
    out = _run("""
        pid = os.fork()
        if pid == 0:
            os._exit(0 if all(work(slice(0, 5000))) else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, tmp_path)
    assert out.split() == ["0"]


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_pool_of_children_fits_and_predicts(method, tmp_path):
    out = _run(f"""
        if __name__ == "__main__":
            with mp.get_context("{method}").Pool(2) as pool:
                print(pool.map(work, [slice(0, 5000), slice(5000, 20000)]))
    """, tmp_path)
    assert out.strip() == str([(True, True, True, True)] * 2)
