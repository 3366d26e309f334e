#!/usr/bin/python3
"""Times float32 GEMM in numpy's BLAS at the shapes of GemmBenchmark, for comparison with Scorch's kernels.

y[M, N] = x[M, K] @ W[N, K].T: the same product as Scorch's CpuOps.matmul (numpy hands BLAS the transposed
view, no copy). Each shape reports the median of several timed runs as GFLOP/s = 2*M*N*K / time.

Run with Debian's numpy (apt-get install -y python3-numpy libopenblas0), which links OpenBLAS through
libblas.so.3, hence /usr/bin/python3 rather than whichever python3 is first on PATH:

    OPENBLAS_NUM_THREADS=2 /usr/bin/python3 dev/openblas-sgemm.py [--threads 2] [--json out.json]

--threads sets OPENBLAS_NUM_THREADS (and OMP/MKL equivalents) before numpy loads; default 2, or
$OPENBLAS_NUM_THREADS when set. OPENBLAS_CORETYPE (e.g. Haswell, SkylakeX) forces OpenBLAS's kernel choice; unset,
--fastest-kernel first probes each kernel this CPU can run and runs the fastest (fastest_coretype), since OpenBLAS's
own detection falls back to an old kernel on CPUs newer than its release (Debian's 0.3.21 runs Prescott, SSE3, on
an Emerald Rapids Xeon: 40 GFLOP/s against SkylakeX's 290).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

SHAPES = [(m, k, n) for m in (16, 256, 2048) for (k, n) in ((1024, 1024), (1024, 4096), (4096, 1024))]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=int(os.environ.get("OPENBLAS_NUM_THREADS", "2")))
    p.add_argument("--min-time", type=float, default=0.5, help="seconds of timed runs per shape (at least --runs)")
    p.add_argument("--runs", type=int, default=5, help="minimum timed runs per shape")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--shape", action="append", metavar="MxKxN", help="time only this shape (repeatable; default: all of GemmBenchmark's)")
    p.add_argument("--fastest-kernel", action="store_true",
                   help="unless OPENBLAS_CORETYPE is set, probe OpenBLAS's kernels first and run the fastest")
    p.add_argument("--print-fastest-kernel", action="store_true",
                   help="only print the fastest kernel's OPENBLAS_CORETYPE (empty: OpenBLAS's own choice, or it is set)")
    return p.parse_args()


def blas_info(np):
    """Which BLAS numpy runs on, and OpenBLAS's core type when it can be asked."""
    info = {"numpy": np.__version__, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset: auto-detected)")}
    # threadpoolctl, when installed, names the loaded BLAS, its version, core type and threads.
    try:
        import threadpoolctl

        info["threadpoolctl"] = [
            {k: v for k, v in pool.items() if k in ("internal_api", "version", "architecture", "num_threads", "filepath")}
            for pool in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        pass
    # Otherwise ask the OpenBLAS library mapped into this process directly.
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path.lower() and ".so" in path:
                libs.add(path)
    info["blas_libraries"] = sorted(libs)
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["openblas_corename"] = lib.openblas_get_corename().decode()
            info["openblas_config"] = lib.openblas_get_config().decode().strip()
            info["openblas_num_threads"] = lib.openblas_get_num_threads()
            break
        except (OSError, AttributeError):
            continue
    return info


# OpenBLAS's x86-64 sgemm kernels worth probing, each with the CPU flags it needs (Zen runs the Haswell kernels).
KERNELS = [
    ("Haswell", {"avx2", "fma"}),
    ("SkylakeX", {"avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"}),
    ("Cooperlake", {"avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_bf16"}),
    ("SapphireRapids", {"avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_bf16",
                        "amx_bf16"}),
]
PROBE_SHAPE = "2048x1024x1024"


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def fastest_coretype(threads):
    """OPENBLAS_CORETYPE for the fastest sgemm kernel on this CPU, and what each candidate measured.

    Each candidate (OpenBLAS's own choice, then every kernel in KERNELS whose instructions the CPU has) runs this
    script in a child process at PROBE_SHAPE for 0.4 s; one this OpenBLAS build does not know (it falls back to
    another and says so in its core name) is left out. Returns (None, {}) when OPENBLAS_CORETYPE is already set.
    """
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None, {}
    flags = cpu_flags()
    measured = {}
    for want in [None] + [name for name, needs in KERNELS if needs <= flags]:
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        if want:
            env["OPENBLAS_CORETYPE"] = want
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads), "--shape", PROBE_SHAPE,
                                   "--min-time", "0.4", "--json", out.name], env=env, capture_output=True)
            if done.returncode != 0:
                continue
            result = json.load(open(out.name))
        core = result["blas"].get("openblas_corename")
        if core is None or want and core.lower() != want.lower():
            continue
        measured[core] = max(measured.get(core, 0.0), result["results"][0]["gflops"])
    if not measured:
        return None, {}
    return max(measured, key=measured.get), measured


def bench(np, m, k, n, min_time, runs):
    """Median seconds of one x @ W.T over at least `runs` runs and `min_time` seconds, after a warm-up."""
    rng = np.random.default_rng(42)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = (rng.standard_normal((n, k), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    y = np.empty((m, n), dtype=np.float32)
    wt = w.T
    np.matmul(x, wt, out=y)  # warm-up: threads started, pages touched
    times = []
    start = time.perf_counter()
    while len(times) < runs or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        np.matmul(x, wt, out=y)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2], len(times)


def main():
    args = parse_args()
    # Thread counts and the kernel must be set before numpy (and its BLAS) loads.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.print_fastest_kernel:
        print(fastest_coretype(args.threads)[0] or "")
        return
    probes = {}
    if args.fastest_kernel:
        core, probes = fastest_coretype(args.threads)
        if core:
            os.environ["OPENBLAS_CORETYPE"] = core
    import numpy as np

    info = blas_info(np)
    if probes:
        info["kernel_probes_gflops"] = probes
    print("# numpy BLAS configuration (numpy.show_config):")
    sys.stdout.flush()
    np.show_config()
    print("# BLAS in use: " + json.dumps(info))
    print("# threads: %d (OPENBLAS_NUM_THREADS=%s)" % (args.threads, os.environ["OPENBLAS_NUM_THREADS"]))
    results = []
    shapes = [tuple(int(v) for v in sh.split("x")) for sh in args.shape] if args.shape else SHAPES
    for m, k, n in shapes:
        median, count = bench(np, m, k, n, args.min_time, args.runs)
        gflops = 2.0 * m * n * k / median / 1e9
        results.append({"m": m, "k": k, "n": n, "median_ms": median * 1e3, "runs": count, "gflops": gflops})
        # One parseable line per shape.
        print("sgemm m=%d k=%d n=%d median_ms=%.3f runs=%d gflops=%.2f" % (m, k, n, median * 1e3, count, gflops))
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"blas": info, "threads": args.threads, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
