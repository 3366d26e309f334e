"""Runs a notebook headless with nbclient (kernel python3): python3 notebooks/run_notebook.py NOTEBOOK [--timeout S] [--out EXECUTED.ipynb]

The kernel starts in the notebook's folder. Exits 1 and prints the failing cell's error when a cell fails,
2 when nbclient is missing. Debian: apt-get install python3-nbclient python3-nbformat python3-ipykernel
python3-pandas python3-matplotlib.
"""
import argparse
import re
import sys
import time
from pathlib import Path

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
except ImportError as e:
    print(f"run_notebook: {e}; install python3-nbclient python3-nbformat python3-ipykernel (Debian) or nbclient (pip)", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebook", type=Path)
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    p.add_argument("--out", type=Path, help="write the executed notebook here")
    a = p.parse_args()
    nb = nbformat.read(a.notebook, as_version=4)
    client = NotebookClient(nb, timeout=a.timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(a.notebook.resolve().parent)}})
    t0 = time.time()
    try:
        client.execute()
    except CellExecutionError as e:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # IPython's coloured traceback, uncoloured for logs
        print(f"run_notebook: {a.notebook}: a cell failed:\n{plain}", file=sys.stderr)
        return 1
    finally:
        if a.out:
            nbformat.write(nb, a.out)
    print(f"run_notebook: {a.notebook}: {len(nb.cells)} cells OK in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
