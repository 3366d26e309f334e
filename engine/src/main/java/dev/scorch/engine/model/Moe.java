package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.Mlp;
import dev.scorch.engine.device.MoeExperts;
import dev.scorch.engine.device.MoeShape;

/**
 * DeepseekV3MoE on a device: the noaux_tc router (its gate in fp32), then the routed experts and the shared experts
 * through {@link Device#moeExperts}, each token's experts summed in ascending id on every device.
 */
final class Moe {
    private final Buf gate; // [n_routed_experts, hidden], fp32
    private final Buf eScoreCorrectionBias; // [n_routed_experts]
    private final MoeExperts experts; // the routed experts and the shared experts, with the MoE's shape

    Moe(DeviceWeights w, ModelConfig c, String prefix) {
        gate = w.fp32(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        MoeShape shape = MoeShape.of(c);
        Buf[] gateUp = new Buf[shape.nRoutedExperts()];
        Buf[] down = new Buf[shape.nRoutedExperts()];
        for (int e = 0; e < gateUp.length; e++) {
            Mlp expert = w.mlp(prefix + "experts." + e + ".", shape.hidden());
            gateUp[e] = expert.gateUpProj();
            down[e] = expert.downProj();
        }
        Mlp shared = c.nSharedExperts() > 0 ? w.mlp(prefix + "shared_experts.", shape.hidden()) : null;
        experts = new MoeExperts(shape, gateUp, down, shared);
    }

    /**
     * Routed experts weighted by the router, plus the shared experts: x [T, hidden] → [T, hidden], nothing back to the
     * host on a GPU. routes, when not null, receives each token's experts [T, top_k] (a read back, for tests and
     * diagnostics).
     */
    Buf forward(Pass p, Buf x, int t, int[] routes) {
        Device dev = p.dev;
        MoeShape s = experts.shape();
        int nExperts = s.nRoutedExperts();
        int pairs = t * s.numExpertsPerTok();
        Buf logits = p.floats.take((long) t * nExperts); // [T, n_routed_experts], fp32 weights
        p.gemm(x, t, s.hidden(), gate, nExperts, logits);
        Buf chosen = p.ints.take(pairs); // [T, top_k], ascending id
        Buf weights = p.floats.take(pairs);
        dev.moeRoute(logits, eScoreCorrectionBias, t, s, chosen, weights);
        if (routes != null) {
            dev.read(chosen, routes, 0, pairs);
        }
        // y [T, hidden] = Σ_k weight[t, k] · expert_e(x_t), experts in ascending id, + shared_experts(x)
        Buf y = p.floats.take((long) t * s.hidden());
        dev.moeExperts(x, t, chosen, weights, experts, y, p.rules);
        return y;
    }
}
