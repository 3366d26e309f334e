package dev.scorch.jobs.cli;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.model.ModelInfo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
    name = "make-demo-model",
    mixinStandardHelpOptions = true,
    description = {
        "Writes a deterministic random-weight Kimi K2-shaped checkpoint in the Hugging Face layout",
        "(config.json, sharded safetensors + index, generation_config.json). Its weights are random:",
        "it exists to test and benchmark Scorch, not to produce meaningful text."
    },
    footer = {
        "",
        "Examples:",
        "  bin/scorch make-demo-model --out models/demo-tiny",
        "  bin/scorch make-demo-model --out models/demo-small --preset small",
        "  bin/scorch make-demo-model --out models/demo-fp8 --fp8 --seed 7",
        "  bin/scorch make-demo-model --out models/demo-noqlora --no-q-lora"
    })
public final class MakeDemoModelCommand implements Callable<Integer> {
  /** Left in every folder this command wrote: the only non-empty folder it writes again. */
  static final String MARKER = ".scorch-demo-model";

  @Option(names = "--out", required = true, description = "Folder to write: absent, empty, or one this command wrote before.")
  Path out;

  @Option(names = "--preset", defaultValue = "tiny", description = "tiny (fast tests) or small (the benchmark model). Default: ${DEFAULT-VALUE}.")
  String preset;

  @Option(names = "--fp8", description = "Linear weights as F8_E4M3 with 128x128 weight_scale_inv blocks, like DeepSeek-V3's files.")
  boolean fp8;

  @Option(names = "--no-q-lora", description = "q_lora_rank null: a plain q_proj instead of q_a_proj/q_b_proj.")
  boolean noQLora;

  @Option(names = "--seed", defaultValue = "0", description = "Random seed; the same seed writes the same bytes. Default: ${DEFAULT-VALUE}.")
  long seed;

  @Override
  public Integer call() throws Exception {
    DemoPreset p = DemoPreset.named(preset);
    long t0 = System.nanoTime();
    if (Files.isRegularFile(out) || Files.isDirectory(out) && !Files.exists(out.resolve(MARKER)) && !isEmpty(out)) {
      throw new IllegalArgumentException("--out " + out + " exists and was not written by make-demo-model (no " + MARKER
          + "); it would overwrite its config.json, tokenizer and shards: choose a new folder");
    }
    new DemoModelWriter(p, fp8, !noQLora, seed).write(out);
    Files.writeString(out.resolve(MARKER), p.name() + " seed " + seed + "\n");
    ModelInfo info = ModelInfo.of(out);
    System.out.printf("wrote %s: preset %s%s%s, %,d parameters (%,d active), %,d bytes in %d shards, %.1f s%n",
        out, p.name(), fp8 ? ", fp8" : "", noQLora ? ", no q_lora" : "", info.parameters(), info.activeParameters(),
        info.bytesOnDisk(), info.shards(), (System.nanoTime() - t0) / 1e9);
    return 0;
  }

  private static boolean isEmpty(Path dir) throws java.io.IOException {
    try (var s = Files.list(dir)) {
      return s.findAny().isEmpty();
    }
  }
}
