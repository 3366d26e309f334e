package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.RouterShape;

/**
 * DeepseekV3MoE on a device: the noaux_tc router (its gate in fp32), the tokens permuted by expert and the routed
 * experts run as one grouped GEMM per projection, all on the device, combined in the CPU's order, plus the shared
 * experts.
 */
final class GpuMoe {
    private final Buf gate; // [n_routed_experts, hidden], fp32
    private final Buf eScoreCorrectionBias; // [n_routed_experts]
    private final Buf[] gateUp; // experts.{e}: gate_proj and up_proj stacked, [2 · moe_intermediate, hidden]
    private final Buf[] down; // experts.{e}.down_proj, [hidden, moe_intermediate]
    private final GpuMlp sharedExperts; // null when n_shared_experts is 0
    private final RouterShape router;
    private final int hidden;
    private final int inter; // moe_intermediate_size

    GpuMoe(DeviceWeights w, ModelConfig c, String prefix) {
        gate = w.fp32(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        hidden = c.hiddenSize();
        inter = c.moeIntermediateSize();
        gateUp = new Buf[c.nRoutedExperts()];
        down = new Buf[c.nRoutedExperts()];
        for (int e = 0; e < gateUp.length; e++) {
            GpuMlp expert = GpuMlp.load(w, prefix + "experts." + e + ".", hidden);
            gateUp[e] = expert.gateUpProj();
            down[e] = expert.downProj();
        }
        sharedExperts = c.nSharedExperts() > 0 ? GpuMlp.load(w, prefix + "shared_experts.", hidden) : null;
        router = RouterShape.of(c);
    }

    /**
     * Routed experts weighted by the router, plus the shared experts: x [T, hidden] → [T, hidden]. Nothing comes back to
     * the host: the device permutes the (token, choice) pairs by expert, runs the experts as two grouped GEMMs (gate_up
     * with SwiGLU, down) whose group bounds it computed, and the combine sums each token's experts in ascending id, the
     * CPU's order, then adds the shared experts. routes, when not null, receives each token's experts [T, top_k] (a
     * read back, for tests and diagnostics).
     */
    Buf forward(GpuPass p, Buf x, int t, int[] routes) {
        Device dev = p.dev();
        int nExperts = router.nRoutedExperts();
        int topK = router.numExpertsPerTok();
        int pairs = t * topK;
        Buf logits = p.floats().take((long) t * nExperts); // [T, n_routed_experts], fp32 weights
        dev.gemm(x, t, hidden, gate, nExperts, logits, p.precision());
        Buf experts = p.ints().take(pairs); // [T, top_k], ascending id
        Buf weights = p.floats().take(pairs);
        dev.moeRoute(logits, eScoreCorrectionBias, t, router, experts, weights);
        if (routes != null) {
            dev.read(experts, routes, 0, pairs);
        }
        // Slots: the pairs grouped by expert in ascending id, tokens in order within an expert.
        Buf offsets = p.ints().take(nExperts + 1L); // expert e's slots [offsets[e], offsets[e + 1])
        Buf slotOf = p.ints().take(pairs); // slot of each (token, choice)
        Buf slotRow = p.ints().take(pairs); // token of each slot
        dev.moePermute(experts, t, topK, nExperts, offsets, slotOf, slotRow);
        Buf xs = p.floats().take((long) pairs * hidden); // [slots, hidden]
        dev.gatherRows(x, slotRow, pairs, hidden, xs);
        Buf act = p.floats().take((long) pairs * inter); // [slots, moe_intermediate]
        dev.gemmExpertsSwiglu(xs, offsets, pairs, hidden, gateUp, inter, act, p.precision());
        Buf ye = p.floats().take((long) pairs * hidden); // [slots, hidden]
        dev.gemmExperts(act, offsets, pairs, inter, down, hidden, ye, p.precision());
        // y [T, hidden] = Σ_k weight[t, k] · ye[slot of (t, k)], experts in ascending id as the CPU sums them, +
        // shared.
        Buf shared = sharedExperts == null ? null : sharedExperts.forward(p, x, t);
        Buf y = p.floats().take((long) t * hidden);
        dev.moeCombine(ye, slotOf, weights, t, topK, hidden, shared, y);
        return y;
    }
}
