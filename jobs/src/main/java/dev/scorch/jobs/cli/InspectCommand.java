package dev.scorch.jobs.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.config.RopeScaling;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.ModelInfo;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
        name = "inspect",
        mixinStandardHelpOptions = true,
        description = {
            "Describes and validates a checkpoint folder: architecture (and a K2.5 wrapper's text model),",
            "total and active parameters (quantized weights counted unpacked), how each tensor group is stored",
            "(BF16, FP8 blocks, INT4 groups), bytes on disk, dense/MoE layers, experts, rope scaling, tokenizer,",
            "validation, and which kernels this machine's JVM would run it with. Exits 1 when the checkpoint is",
            "not valid."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch inspect --model models/demo-tiny",
            "  bin/scorch inspect --model /data/Kimi-K2-Instruct --json"
        })
public final class InspectCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "Hugging Face checkpoint folder.")
    Path model;

    @Option(names = "--json", description = "Print one JSON object instead of text.")
    boolean json;

    @Override
    public Integer call() throws Exception {
        ModelInfo info = ModelInfo.of(model);
        if (json) {
            System.out.println(new ObjectMapper().writeValueAsString(toJson(info)));
        } else {
            print(info, System.out);
        }
        return info.validation().valid() ? 0 : 1;
    }

    static ObjectNode toJson(ModelInfo info) {
        ModelConfig c = info.config();
        ObjectNode o = new ObjectMapper().createObjectNode();
        o.put("model", info.dir().toString());
        o.put("architecture", c.architecture());
        o.put("model_type", c.modelType());
        if (c.isWrapped()) {
            o.put("text_model", ModelConfig.ARCHITECTURE);
            o.put("weight_prefix", c.weightPrefix());
            o.put("multimodal_ignored_tensors", info.multimodalIgnored());
        }
        QuantizationConfig q = c.quantization();
        if (q == null) {
            o.putNull("quantization");
        } else {
            ObjectNode qn = o.putObject("quantization");
            qn.put("quant_method", q.quantMethod());
            qn.put("format", q.format());
            qn.put("scheme", q.scheme().name());
            qn.put("description", q.describe());
            if (q.scheme() == QuantizationConfig.Scheme.INT4_GROUP) {
                qn.put("group_size", q.groupSize());
            } else {
                qn.putArray("block").add(q.blockRows()).add(q.blockCols());
            }
            if (q.ignore() != null) {
                q.ignore().entries().forEach(qn.putArray("ignore")::add);
                q.targets().entries().forEach(qn.putArray("targets")::add);
            }
        }
        ObjectNode storage = o.putObject("storage_by_group");
        info.storageByGroup().forEach((k, v) -> v.forEach(storage.withArray(k)::add));
        o.put("parameters", info.parameters());
        o.put("active_parameters", info.activeParameters());
        o.put("dtype", info.mainDtype());
        ObjectNode byDtype = o.putObject("parameters_by_dtype");
        info.parametersByDtype().forEach(byDtype::put);
        o.put("bytes_on_disk", info.bytesOnDisk());
        o.put("shards", info.shards());
        o.put("num_hidden_layers", c.numHiddenLayers());
        o.put("dense_layers", info.denseLayers());
        o.put("moe_layers", info.moeLayers());
        o.put("n_routed_experts", c.nRoutedExperts());
        o.put("num_experts_per_tok", c.numExpertsPerTok());
        o.put("n_shared_experts", c.nSharedExperts());
        o.put("vocab_size", c.vocabSize());
        o.put("hidden_size", c.hiddenSize());
        if (c.qLoraRank() == null) {
            o.putNull("q_lora_rank");
        } else {
            o.put("q_lora_rank", c.qLoraRank());
        }
        o.put("kv_lora_rank", c.kvLoraRank());
        RopeScaling r = c.ropeScaling();
        if (r == null) {
            o.putNull("rope_scaling");
        } else {
            ObjectNode rope = o.putObject("rope_scaling");
            rope.put("type", r.type());
            rope.put("factor", r.factor());
            rope.put("original_max_position_embeddings", r.originalMaxPositionEmbeddings());
        }
        o.put("max_position_embeddings", c.maxPositionEmbeddings());
        if (info.tokenizer() == null) {
            o.putNull("tokenizer");
        } else {
            o.put("tokenizer", info.tokenizer());
        }
        o.put("valid", info.validation().valid());
        info.validation().errors().forEach(o.withArray("errors")::add);
        o.put("ignored_tensors", info.validation().ignored().size());
        info.validation().unexpected().forEach(o.withArray("unexpected_tensors")::add);
        o.set("kernels", KernelSelection.current().toJson());
        return o;
    }

    static void print(ModelInfo info, PrintStream out) {
        ModelConfig c = info.config();
        out.printf("model          %s%n", info.dir());
        if (c.isWrapped()) {
            out.printf("architecture   %s (model_type %s)%n", c.architecture(), ModelConfig.K25_MODEL_TYPE);
            out.printf(
                    "wrapper        text model %s of %s, weights under %s; %s ignored: %d tensors%n",
                    ModelConfig.ARCHITECTURE,
                    c.architecture(),
                    c.weightPrefix(),
                    String.join(
                            ", ",
                            ModelConfig.K25_IGNORED_PREFIXES.stream()
                                    .map(p -> p + "*")
                                    .toList()),
                    info.multimodalIgnored());
        } else {
            out.printf("architecture   %s (model_type %s)%n", ModelConfig.ARCHITECTURE, c.modelType());
        }
        out.printf(
                "parameters     %,d total, %,d active per token (quantized weights counted unpacked)%n",
                info.parameters(), info.activeParameters());
        out.printf("dtypes         %s%n", info.parametersByDtype());
        out.printf("on disk        %,d bytes in %d shard(s)%n", info.bytesOnDisk(), info.shards());
        out.printf(
                "layers         %d (%d dense, %d MoE), hidden %d, vocab %d%n",
                c.numHiddenLayers(), info.denseLayers(), info.moeLayers(), c.hiddenSize(), c.vocabSize());
        out.printf(
                "attention      MLA, %d heads, q_lora_rank %s, kv_lora_rank %d, qk_nope %d + qk_rope %d, v %d%n",
                c.numAttentionHeads(),
                c.qLoraRank() == null ? "null (q_proj)" : c.qLoraRank(),
                c.kvLoraRank(),
                c.qkNopeHeadDim(),
                c.qkRopeHeadDim(),
                c.vHeadDim());
        out.printf(
                "experts        %d routed (top-%d, %d groups keep %d), %d shared, scaling %.3f%n",
                c.nRoutedExperts(),
                c.numExpertsPerTok(),
                c.nGroup(),
                c.topkGroup(),
                c.nSharedExperts(),
                c.routedScalingFactor());
        RopeScaling r = c.ropeScaling();
        out.printf(
                "rope           theta %.0f, %s%n",
                c.ropeTheta(),
                r == null
                        ? "no scaling"
                        : String.format(
                                "yarn factor %.1f over %d original positions (max %d)",
                                r.factor(), r.originalMaxPositionEmbeddings(), c.maxPositionEmbeddings()));
        QuantizationConfig q = c.quantization();
        out.printf(
                "quantization   %s%n",
                q == null
                        ? "none"
                        : q.describe()
                                + (q.activationScheme().equals("dynamic")
                                        ? "; dynamic activation quantization not emulated (activations fp32)"
                                        : ""));
        out.printf("storage        %s%n", info.storageSummary());
        out.printf("tokenizer      %s%n", info.tokenizer() == null ? "none found" : info.tokenizer());
        if (info.validation().valid()) {
            out.printf(
                    "validation     OK (%d ignored tensors, %d unexpected)%n",
                    info.validation().ignored().size(),
                    info.validation().unexpected().size());
        } else {
            out.printf(
                    "validation     FAILED, %d errors:%n",
                    info.validation().errors().size());
            info.validation().errors().forEach(e -> out.println("  " + e));
        }
        KernelSelection k = KernelSelection.current();
        out.printf(
                "kernels        prefill GEMM %s; decode %s; attention %s; native library %s%n",
                k.prefillGemm().kernel(), k.decodeGemm().kernel(), k.attention().kernel(), k.nativeLibrary());
    }
}
