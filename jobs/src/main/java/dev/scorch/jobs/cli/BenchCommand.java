package dev.scorch.jobs.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.bench.PrefillBenchmark;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
    name = "bench",
    mixinStandardHelpOptions = true,
    description = {
        "Benchmarks the engine on one machine, without Spark: warm-up, then timed runs of batched",
        "prefill scoring on random token ids. Prints tokens/s (median, min, max), model GFLOP/s,",
        "peak RSS, and one JSON line with the same figures."
    },
    footer = {
        "",
        "Examples:",
        "  bin/scorch make-demo-model --out models/demo-small --preset small",
        "  bin/scorch bench --model models/demo-small --mode prefill --batch 8 --seq 256 --threads 2",
        "  bin/scorch bench --model models/demo-small --mode prefill --batch 1 --seq 1024 --runs 5"
    })
public final class BenchCommand implements Callable<Integer> {
  @Option(names = "--model", required = true, description = "Checkpoint folder.")
  Path model;

  @Option(names = "--mode", defaultValue = "prefill", description = "prefill (decode arrives with generation). Default: ${DEFAULT-VALUE}.")
  String mode;

  @Option(names = "--batch", defaultValue = "8", description = "Sequences per batch. Default: ${DEFAULT-VALUE}.")
  int batch;

  @Option(names = "--seq", defaultValue = "256", description = "Tokens per sequence. Default: ${DEFAULT-VALUE}.")
  int seq;

  @Option(names = "--threads", description = "Engine threads. Default: available processors.")
  Integer threads;

  @Option(names = "--runs", defaultValue = "5", description = "Timed runs. Default: ${DEFAULT-VALUE}.")
  int runs;

  @Option(names = "--warmup", defaultValue = "2", description = "Untimed warm-up runs. Default: ${DEFAULT-VALUE}.")
  int warmup;

  @Option(names = "--seed", defaultValue = "0", description = "Seed of the random token ids. Default: ${DEFAULT-VALUE}.")
  long seed;

  @Override
  public Integer call() throws Exception {
    if (!mode.equals("prefill")) {
      throw new IllegalArgumentException("--mode " + mode + " is not supported yet; use prefill");
    }
    if (batch < 1 || seq < 1 || runs < 1 || warmup < 0) {
      throw new IllegalArgumentException("--batch, --seq and --runs must be >= 1, --warmup >= 0");
    }
    int n = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
    DeepseekV3Model m = DeepseekV3Model.load(model);
    try (CpuOps ops = new CpuOps(n)) {
      PrefillBenchmark.Result r = PrefillBenchmark.run(m, ops, batch, seq, warmup, runs, seed);
      System.out.printf("prefill %d x %d, %d threads (%s), java %s: %.1f tokens/s median (min %.1f, max %.1f) over %d runs;"
              + " %.1f model GFLOP/s; peak RSS %.0f MiB%n",
          batch, seq, n, ops.simd() ? "Vector API" : "scalar", Runtime.version().feature(), r.medianTokensPerSec(),
          r.minTokensPerSec(), r.maxTokensPerSec(), runs, r.modelGflopPerSec(), r.peakRssBytes() / 1048576.0);
      ObjectNode j = new ObjectMapper().createObjectNode();
      j.put("mode", mode);
      j.put("model", model.toString());
      j.put("batch", batch);
      j.put("seq", seq);
      j.put("threads", n);
      j.put("java", Runtime.version().feature());
      j.put("simd", ops.simd());
      j.put("runs", runs);
      j.put("tokens_per_s_median", r.medianTokensPerSec());
      j.put("tokens_per_s_min", r.minTokensPerSec());
      j.put("tokens_per_s_max", r.maxTokensPerSec());
      j.put("seconds_median", r.medianSeconds());
      j.put("model_gflop_per_s", r.modelGflopPerSec());
      j.put("peak_rss_bytes", r.peakRssBytes());
      System.out.println(new ObjectMapper().writeValueAsString(j));
    }
    return 0;
  }
}
