"""What the notebooks share: where the repository is, reading job outputs into pandas, saving figures.

Parquet is read with pyarrow when it is importable; Debian has no pyarrow, so otherwise through
`bin/scorch sql --format csv` (Spark on local[*]) with array and struct columns parsed back from JSON.
JSON-lines outputs (`--output-format jsonl`) are read by pandas directly.

Environment:
  SCORCH_REPO       the repository root (default: found from the current folder upwards)
  SCORCH_SQL_CMD    the command that runs `scorch sql` (default: "<repo>/bin/scorch sql")
  SCORCH_NB_SAVE_PNG  when set (not 0/false), save_png() writes the figure next to the notebooks
"""
import io
import json
import os
import shlex
import subprocess
from pathlib import Path

import pandas as pd

NOTEBOOKS = Path(__file__).resolve().parent


def repo_root():
    env = os.environ.get("SCORCH_REPO")
    return Path(env).resolve() if env else NOTEBOOKS.parent


def path_from_env(var, default):
    """$var (or default), relative paths taken from the repository root."""
    p = Path(os.environ.get(var) or default)
    return p if p.is_absolute() else repo_root() / p


def has_pyarrow():
    try:
        import pyarrow.parquet  # noqa: F401
        return True
    except ImportError:
        return False


def _is_jsonl(path):
    path = Path(path)
    if path.suffix in (".json", ".jsonl"):
        return True
    return path.is_dir() and any(path.glob("part-*.json")) and not any(path.glob("*.parquet"))


def sql(query, views=None):
    """Runs one Spark SQL query with `scorch sql` (views: {name: path}) and returns a DataFrame."""
    cmd = shlex.split(os.environ.get("SCORCH_SQL_CMD") or shlex.quote(str(repo_root() / "bin" / "scorch")) + " sql")
    for name, path in (views or {}).items():
        cmd += ["--view", f"{name}={path}"]
    cmd += ["--format", "csv", query]
    run = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"scorch sql failed ({run.returncode}): {' '.join(cmd[-3:])}\n{run.stderr[-4000:]}")
    df = pd.read_csv(io.StringIO(run.stdout), keep_default_na=False, na_values=[""])
    for c in df.columns:  # arrays, structs and maps come as JSON text
        if df[c].dtype == object:
            vals = df[c].dropna()
            if len(vals) and vals.map(lambda v: isinstance(v, str) and v[:1] in "[{").all():
                df[c] = df[c].map(lambda v: json.loads(v) if isinstance(v, str) else None)
    return df


def read_output(path, columns=None):
    """A job's output folder (Parquet, hive partitions as columns; or JSON lines) as a DataFrame."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the job first, or point the notebook's env var at its output")
    if _is_jsonl(path):
        files = [path] if path.is_file() else sorted(path.glob("part-*.json"))
        df = pd.concat([pd.read_json(f, lines=True, dtype=False, convert_dates=False) for f in files], ignore_index=True)
        return df[columns] if columns else df
    if has_pyarrow():
        import pyarrow.dataset as ds
        # Partition values as strings (dictionaries), as Spark reads them with type inference off.
        part = ds.HivePartitioning.discover(infer_dictionary=True)
        table = ds.dataset(str(path), format="parquet", partitioning=part).to_table(columns=columns)
        df = table.to_pandas()
        for c in df.columns:  # hive partition values come back as categories
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(str)
        return df
    cols = "*" if not columns else ", ".join(f"`{c}`" for c in columns)
    return sql(f"SELECT {cols} FROM t", {"t": str(path)})


def save_png(fig, name):
    """Saves fig as notebooks/NAME when SCORCH_NB_SAVE_PNG is set; returns the path or None."""
    if os.environ.get("SCORCH_NB_SAVE_PNG", "").lower() in ("", "0", "false", "no"):
        return None
    out = NOTEBOOKS / name
    fig.savefig(out, dpi=80, bbox_inches="tight")
    return out
