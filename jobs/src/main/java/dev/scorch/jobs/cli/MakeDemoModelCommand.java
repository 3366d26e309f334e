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
            "  bin/scorch make-demo-model --out models/demo-int4 --int4",
            "  bin/scorch make-demo-model --out models/demo-k25-int4 --int4 --wrap k25",
            "  bin/scorch make-demo-model --out models/demo-noqlora --no-q-lora"
        })
public final class MakeDemoModelCommand implements Callable<Integer> {
    /** Left in every folder this command wrote: the only non-empty folder it writes again. */
    static final String MARKER = ".scorch-demo-model";

    @Option(
            names = "--out",
            required = true,
            description = "Folder to write: absent, empty, or one this command wrote before.")
    Path out;

    @Option(
            names = "--preset",
            defaultValue = "tiny",
            description = {
                "tiny (fast tests), small (the benchmark model) or k2-layers (Kimi K2's exact widths with",
                "--layers layers and --experts routed experts: real GEMM shapes on one machine). Default: ${DEFAULT-VALUE}."
            })
    String preset;

    @Option(
            names = "--layers",
            description = "k2-layers: layers in all, the first dense (default " + DemoPreset.K2_LAYERS_DEFAULT_LAYERS
                    + "; Kimi K2 has 61).")
    Integer layers;

    @Option(
            names = "--experts",
            description = "k2-layers: routed experts per MoE layer, 8 to 384 (default "
                    + DemoPreset.K2_LAYERS_DEFAULT_EXPERTS + "; Kimi K2 has 384).")
    Integer experts;

    @Option(
            names = "--fp8",
            description = "Linear weights as F8_E4M3 with 128x128 weight_scale_inv blocks, like DeepSeek-V3's files.")
    boolean fp8;

    @Option(
            names = "--int4",
            description = {
                "Routed experts as compressed-tensors INT4 (pack-quantized, group 32, BF16 scales,",
                "weight_shape I64), the rest BF16, with Kimi-K2-Thinking's quantization_config and ignore list."
            })
    boolean int4;

    @Option(
            names = "--fp8-ct",
            description = {
                "Linear weights as compressed-tensors FP8 (float-quantized, 128x128 blocks,",
                "weight_scale), as llm-compressor's FP8_BLOCK exports of Kimi K2 are."
            })
    boolean fp8Ct;

    @Option(
            names = "--wrap",
            paramLabel = "k25",
            description = {
                "k25: wrap the text model as Kimi K2.5 publishes it",
                "(KimiK25ForConditionalGeneration, config under text_config, weights under language_model.,",
                "small vision_tower/mm_projector tensors that Scorch ignores)."
            })
    String wrap;

    @Option(names = "--no-q-lora", description = "q_lora_rank null: a plain q_proj instead of q_a_proj/q_b_proj.")
    boolean noQLora;

    @Option(
            names = "--seed",
            defaultValue = "0",
            description = "Random seed; the same seed writes the same bytes. Default: ${DEFAULT-VALUE}.")
    long seed;

    @Override
    public Integer call() throws Exception {
        DemoPreset p;
        if (preset.equals("k2-layers")) {
            p = DemoPreset.k2Layers(
                    layers != null ? layers : DemoPreset.K2_LAYERS_DEFAULT_LAYERS,
                    experts != null ? experts : DemoPreset.K2_LAYERS_DEFAULT_EXPERTS);
        } else if (layers != null || experts != null) {
            throw new IllegalArgumentException("--layers and --experts shape the k2-layers preset, not " + preset);
        } else {
            p = DemoPreset.named(preset);
        }
        long t0 = System.nanoTime();
        if (Files.isRegularFile(out) || Files.isDirectory(out) && !Files.exists(out.resolve(MARKER)) && !isEmpty(out)) {
            throw new IllegalArgumentException("--out " + out + " exists and was not written by make-demo-model (no "
                    + MARKER + "); it would overwrite its config.json, tokenizer and shards: choose a new folder");
        }
        if ((fp8 ? 1 : 0) + (int4 ? 1 : 0) + (fp8Ct ? 1 : 0) > 1) {
            throw new IllegalArgumentException(
                    "--fp8, --int4 and --fp8-ct choose the weights' format: give one of them");
        }
        if (wrap != null && !wrap.equals("k25")) {
            throw new IllegalArgumentException(
                    "--wrap " + wrap + ": the one wrapper written is k25 (KimiK25ForConditionalGeneration)");
        }
        DemoModelWriter.Weights weights = fp8
                ? DemoModelWriter.Weights.FP8
                : int4
                        ? DemoModelWriter.Weights.INT4
                        : fp8Ct ? DemoModelWriter.Weights.FP8_CT : DemoModelWriter.Weights.BF16;
        new DemoModelWriter(p, weights, !noQLora, wrap != null, seed).write(out);
        Files.writeString(out.resolve(MARKER), p.name() + " seed " + seed + "\n");
        ModelInfo info = ModelInfo.of(out);
        System.out.printf(
                "wrote %s: preset %s, %s weights%s%s, %,d parameters (%,d active), %,d bytes in %d shards, %.1f s%n",
                out,
                p.name(),
                weights.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-'),
                wrap != null ? ", wrapped as K2.5" : "",
                noQLora ? ", no q_lora" : "",
                info.parameters(),
                info.activeParameters(),
                info.bytesOnDisk(),
                info.shards(),
                (System.nanoTime() - t0) / 1e9);
        return 0;
    }

    private static boolean isEmpty(Path dir) throws java.io.IOException {
        try (var s = Files.list(dir)) {
            return s.findAny().isEmpty();
        }
    }
}
