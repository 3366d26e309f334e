"""What dev/gemm-paired and dev/prefill-paired share: the EnginePairs process, numpy's threads and BLAS, its timed slice.

Both alternate Scorch (one Java process, answering one command line at a time) with numpy/OpenBLAS sgemm in this
process, so that neighbouring slices share the machine's speed of the moment.
"""
import importlib.util
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Engine:
    """The EnginePairs process (through dev/jmh --main): one command line in, one answer line out."""

    def __init__(self, threads, who):
        self.who = who
        self.proc = subprocess.Popen([os.path.join(ROOT, "dev", "jmh"), "--main", "dev.scorch.engine.bench.EnginePairs", str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            sys.exit("%s: EnginePairs ended without answering %r (its errors are above)" % (self.who, line))
        return answer.strip()

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=60)


def numpy_with_threads(threads):
    """numpy, its BLAS limited to threads (the variables must be set before numpy loads), and a description of that BLAS."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    spec = importlib.util.spec_from_file_location("openblas_sgemm", os.path.join(ROOT, "dev", "openblas-sgemm.py"))
    openblas_sgemm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(openblas_sgemm)
    # The anchor is OpenBLAS's fastest kernel here, not the one it detects (Prescott on CPUs newer than its release).
    core, probes = openblas_sgemm.fastest_coretype(threads)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    import numpy as np

    info = openblas_sgemm.blas_info(np)
    if probes:
        info["kernel_probes_gflops"] = probes
    return np, info


def numpy_slice(np, x, wt, y, seconds):
    """Median seconds of x @ W.T over a slice of about `seconds` (at least 3 calls)."""
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        np.matmul(x, wt, out=y)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def sgemm_operands(np, m, k, n):
    """x [M, K], W^T (a transposed view of W [N, K], as Scorch stores weights) and y [M, N], fp32, seeded."""
    rng = np.random.default_rng(42)
    x = rng.standard_normal((m, k), dtype=np.float32)
    wt = (rng.standard_normal((n, k), dtype=np.float32) / np.sqrt(k)).astype(np.float32).T
    return x, wt, np.empty((m, n), dtype=np.float32)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def openblas_label(blas):
    """OpenBLAS's version and core, as the tables print them."""
    version = blas.get("openblas_config", "?").split(" ")[1] if "openblas_config" in blas else "?"
    label = "%s, core %s" % (version, blas.get("openblas_corename", "?"))
    probes = blas.get("kernel_probes_gflops")
    if probes:
        label += " (fastest probed: %s GFLOP/s)" % ", ".join("%s %.0f" % kv for kv in sorted(probes.items(), key=lambda kv: kv[1]))
    return label
