package dev.scorch.engine.bench;

import dev.scorch.engine.config.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The prefill rate of a full-size model extrapolated from a few measured layers of the same widths (the k2-layers
 * benchmark model): each of its dense layers takes the measured dense layer's time, each MoE layer the measured MoE
 * layer's time scaled by the FLOP ratio (only the router gate grows with the experts: top_k experts run per token
 * whatever their number), plus the measured time outside the layers (embedding, final norm, lm_head, log-softmax).
 *
 * <p>It assumes the full model's MoE layer runs its FLOPs as fast as the measured one. With n_routed_experts experts
 * each expert's GEMM gets tokens x top_k / n_routed_experts rows instead of tokens x top_k / (the benchmark's experts),
 * so at a batch too small to fill those GEMMs the real layer is slower: the figure is an upper bound there. Weights and
 * memory do grow with the experts (gpu-budget --plan counts them); a balanced pipeline over N GPUs, each running 1/N of
 * the layers, reaches this figure per GPU.
 *
 * @param bench            the benchmarked model's config
 * @param layers           the full model's num_hidden_layers
 * @param denseLayers      its first_k_dense_replace (dense layers first, the rest MoE)
 * @param experts          its n_routed_experts
 * @param tokens           tokens of one measured pass (batch x seq)
 * @param seq              tokens per sequence (attention's keys)
 * @param denseSeconds     one dense layer's time per pass (the mean over the benchmark's dense layers)
 * @param moeSeconds       one MoE layer's time per pass (the mean over its MoE layers)
 * @param restSeconds      the pass's time outside the layers
 */
public record FullModelEstimate(
        ModelConfig bench,
        int layers,
        int denseLayers,
        int experts,
        long tokens,
        int seq,
        double denseSeconds,
        double moeSeconds,
        double restSeconds) {

    public FullModelEstimate {
        if (layers < 1 || denseLayers < 0 || denseLayers > layers || experts < bench.numExpertsPerTok()) {
            throw new IllegalArgumentException(String.format(
                    "full model of %d layers, %d dense, %d experts: need layers >= 1, 0 <= dense <= layers,"
                            + " experts >= top_k (%d)",
                    layers, denseLayers, experts, bench.numExpertsPerTok()));
        }
    }

    /** Kimi K2's layer counts (Kimi-K2-Instruct's config.json: 61 layers, first_k_dense_replace 1, 384 experts). */
    public static final int K2_LAYERS = 61;

    public static final int K2_DENSE_LAYERS = 1;
    public static final int K2_EXPERTS = 384;

    private double keys() {
        return LayerFlops.meanKeys(seq);
    }

    /** FLOPs per token of one dense layer. */
    public double denseFlops() {
        return LayerFlops.attentionProjections(bench)
                + keys() * LayerFlops.attentionPerKey(bench)
                + LayerFlops.denseMlp(bench);
    }

    /** FLOPs per token of one MoE layer with the benchmark's experts. */
    public double benchMoeFlops() {
        return LayerFlops.attentionProjections(bench)
                + keys() * LayerFlops.attentionPerKey(bench)
                + LayerFlops.router(bench)
                + LayerFlops.experts(bench);
    }

    /** FLOPs per token of one MoE layer with the full model's experts (its router gate's [experts, hidden]). */
    public double fullMoeFlops() {
        return benchMoeFlops() - LayerFlops.router(bench) + 2.0 * bench.hiddenSize() * experts;
    }

    /** FLOPs per token of the whole full model, lm_head included. */
    public double fullFlopsPerToken() {
        return denseLayers * denseFlops() + (layers - denseLayers) * fullMoeFlops() + LayerFlops.head(bench);
    }

    /** One full MoE layer's time per pass: the measured one's, scaled by the FLOP ratio. */
    public double fullMoeSeconds() {
        return moeSeconds * fullMoeFlops() / benchMoeFlops();
    }

    /** The full model's time per pass. */
    public double fullSeconds() {
        return denseLayers * denseSeconds + (layers - denseLayers) * fullMoeSeconds() + restSeconds;
    }

    public double tokensPerSecond() {
        return tokens / fullSeconds();
    }

    public double flopsPerSecond() {
        return fullFlopsPerToken() * tokensPerSecond();
    }

    /** The arithmetic, line by line, for the benchmark's output. */
    public List<String> lines(DevicePeak peak) {
        List<String> out = new ArrayList<>();
        out.add(String.format(
                Locale.ROOT,
                "full model at these widths: %d layers (%d dense + %d MoE), %d experts, top-%d; %d tokens a pass, %d"
                        + " per sequence",
                layers,
                denseLayers,
                layers - denseLayers,
                experts,
                bench.numExpertsPerTok(),
                tokens,
                seq));
        out.add(String.format(
                Locale.ROOT,
                "  MoE layer FLOPs/token: %.1f M measured (router %d experts: %.2f M) -> %.1f M with %d experts"
                        + " (router %.2f M); ratio %.5f",
                benchMoeFlops() / 1e6,
                bench.nRoutedExperts(),
                LayerFlops.router(bench) / 1e6,
                fullMoeFlops() / 1e6,
                experts,
                2.0 * bench.hiddenSize() * experts / 1e6,
                fullMoeFlops() / benchMoeFlops()));
        out.add(String.format(
                Locale.ROOT,
                "  time a pass = %d x %.4f s (dense) + %d x %.4f s x %.5f (MoE) + %.4f s (embedding, norm, lm_head,"
                        + " log-softmax) = %.4f s",
                denseLayers,
                denseSeconds,
                layers - denseLayers,
                moeSeconds,
                fullMoeFlops() / benchMoeFlops(),
                restSeconds,
                fullSeconds()));
        out.add(String.format(
                Locale.ROOT,
                "  prefill %d tokens / %.4f s = %.3g tokens/s (one device running every layer; per GPU of a balanced"
                        + " pipeline)",
                tokens,
                fullSeconds(),
                tokensPerSecond()));
        out.add(String.format(
                Locale.ROOT,
                "  FLOPs/token = %d x %.1f M + %d x %.1f M + %.1f M (lm_head) = %.2f G; x %.3g tokens/s = %s%s",
                denseLayers,
                denseFlops() / 1e6,
                layers - denseLayers,
                fullMoeFlops() / 1e6,
                LayerFlops.head(bench) / 1e6,
                fullFlopsPerToken() / 1e9,
                tokensPerSecond(),
                DevicePeak.rate(flopsPerSecond()),
                peak == null ? "" : "; " + Mfu.describe(peak, flopsPerSecond())));
        return out;
    }
}
