package dev.scorch.engine.device;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.RouterShape;

/**
 * DeepseekV3MoE on a device: the noaux_tc router (its gate in fp32), then the routed experts and the shared experts
 * through {@link Device#moeExperts}, each token's experts summed in ascending id on every device.
 */
final class Moe {
    private final Buf gate; // [n_routed_experts, hidden], fp32
    private final Buf eScoreCorrectionBias; // [n_routed_experts]
    private final Buf[] gateUp; // experts.{e}: gate_proj and up_proj stacked, [2 · moe_intermediate, hidden]
    private final Buf[] down; // experts.{e}.down_proj, [hidden, moe_intermediate]
    private final Mlp sharedExperts; // null when n_shared_experts is 0
    private final RouterShape router;
    private final int hidden;
    private final int inter; // moe_intermediate_size

    Moe(DeviceWeights w, ModelConfig c, String prefix) {
        gate = w.fp32(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        hidden = c.hiddenSize();
        inter = c.moeIntermediateSize();
        gateUp = new Buf[c.nRoutedExperts()];
        down = new Buf[c.nRoutedExperts()];
        for (int e = 0; e < gateUp.length; e++) {
            Mlp expert = Mlp.load(w, prefix + "experts." + e + ".", hidden);
            gateUp[e] = expert.gateUpProj();
            down[e] = expert.downProj();
        }
        sharedExperts = c.nSharedExperts() > 0 ? Mlp.load(w, prefix + "shared_experts.", hidden) : null;
        router = RouterShape.of(c);
    }

    /**
     * Routed experts weighted by the router, plus the shared experts: x [T, hidden] → [T, hidden], nothing back to the
     * host on a GPU. routes, when not null, receives each token's experts [T, top_k] (a read back, for tests and
     * diagnostics).
     */
    Buf forward(Pass p, Buf x, int t, int[] routes) {
        Device dev = p.dev;
        int nExperts = router.nRoutedExperts();
        int topK = router.numExpertsPerTok();
        int pairs = t * topK;
        Buf logits = p.floats.take((long) t * nExperts); // [T, n_routed_experts], fp32 weights
        p.gemm(x, t, hidden, gate, nExperts, logits);
        Buf experts = p.ints.take(pairs); // [T, top_k], ascending id
        Buf weights = p.floats.take(pairs);
        dev.moeRoute(logits, eScoreCorrectionBias, t, router, experts, weights);
        if (routes != null) {
            dev.read(experts, routes, 0, pairs);
        }
        // y [T, hidden] = Σ_k weight[t, k] · expert_e(x_t), experts in ascending id, + shared_experts(x)
        Buf y = p.floats.take((long) t * hidden);
        dev.moeExperts(
                x,
                t,
                hidden,
                experts,
                weights,
                topK,
                gateUp,
                down,
                inter,
                sharedExperts == null ? null : sharedExperts.gateUpProj(),
                sharedExperts == null ? null : sharedExperts.downProj(),
                sharedExperts == null ? 0 : sharedExperts.inter(),
                y,
                p.rules.precision(),
                p.rules.rows(),
                p.rules.floats(),
                p.rules.ints());
        return y;
    }
}
