package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.RouterShape;

/**
 * DeepseekV3MoE on a device: the noaux_tc router (its gate in fp32), routed experts as grouped GEMMs over their
 * tokens, combined in the CPU's order, plus the shared experts.
 */
final class GpuMoe {
    private final Buf gate; // [n_routed_experts, hidden], fp32
    private final Buf eScoreCorrectionBias; // [n_routed_experts]
    private final GpuMlp[] routedExperts; // experts.{e}
    private final GpuMlp sharedExperts; // null when n_shared_experts is 0
    private final RouterShape router;
    private final int hidden;
    private final int inter; // moe_intermediate_size

    GpuMoe(DeviceWeights w, ModelConfig c, String prefix) {
        gate = w.fp32(prefix + "gate.weight");
        eScoreCorrectionBias = w.vector(prefix + "gate.e_score_correction_bias");
        hidden = c.hiddenSize();
        inter = c.moeIntermediateSize();
        routedExperts = new GpuMlp[c.nRoutedExperts()];
        for (int e = 0; e < routedExperts.length; e++) {
            routedExperts[e] = GpuMlp.load(w, prefix + "experts." + e + ".", hidden);
        }
        sharedExperts = c.nSharedExperts() > 0 ? GpuMlp.load(w, prefix + "shared_experts.", hidden) : null;
        router = RouterShape.of(c);
    }

    /**
     * Routed experts weighted by the router, plus the shared experts: x [T, hidden] → [T, hidden]. The routing comes
     * back to the host to group tokens per expert; the experts hit run as two grouped GEMMs (gate_up, down) over their
     * tokens, and the combine kernel sums each token's experts in ascending id, the CPU's order.
     */
    Buf forward(GpuPass p, Buf x, int t, int[] routes) {
        Device dev = p.dev();
        int nExperts = router.nRoutedExperts();
        int topK = router.numExpertsPerTok();
        Buf logits = p.floats().take((long) t * nExperts); // [T, n_routed_experts], fp32 weights
        dev.gemm(x, t, hidden, gate, nExperts, logits, p.precision());
        Buf expertsBuf = p.ints().take((long) t * topK);
        Buf weightsBuf = p.floats().take((long) t * topK);
        dev.moeRoute(logits, eScoreCorrectionBias, t, router, expertsBuf, weightsBuf);
        int[] experts = new int[t * topK];
        float[] weights = new float[t * topK];
        dev.read(expertsBuf, experts, 0, experts.length);
        dev.read(weightsBuf, weights, 0, weights.length);
        if (routes != null) {
            System.arraycopy(experts, 0, routes, 0, experts.length);
        }
        // Slots: each (token, choice) pair, grouped by expert in ascending id, tokens in order within an expert. The
        // experts hit are the groups of two grouped GEMMs; each group gets the same number of slots (the busiest
        // expert's count: padding a device may compute and nobody reads) when the device batches groups, unless that
        // would
        // more than double them.
        int[] count = new int[nExperts];
        for (int e : experts) {
            count[e]++;
        }
        int groups = 0;
        int capacity = 0;
        for (int c : count) {
            groups += c > 0 ? 1 : 0;
            capacity = Math.max(capacity, c);
        }
        boolean padded = dev.batchesGroups() && (long) groups * capacity <= 2L * t * topK;
        int[] groupStart = new int[groups];
        int[] groupRows = new int[groups];
        Buf[] gateUp = new Buf[groups];
        Buf[] down = new Buf[groups];
        int[] start = new int[nExperts];
        int slots = 0;
        for (int e = 0, g = 0; e < nExperts; e++) {
            if (count[e] > 0) {
                start[e] = slots;
                groupStart[g] = slots;
                groupRows[g] = count[e];
                gateUp[g] = routedExperts[e].gateUpProj();
                down[g++] = routedExperts[e].downProj();
                slots += padded ? capacity : count[e];
            }
        }
        int[] slotRow = new int[slots]; // token of each slot (padding reads token 0)
        int[] slotOf = new int[t * topK]; // slot of each (token, choice)
        for (int i = 0; i < t; i++) {
            for (int k = 0; k < topK; k++) {
                int slot = start[experts[i * topK + k]]++;
                slotRow[slot] = i;
                slotOf[i * topK + k] = slot;
            }
        }
        Buf slotRowBuf = p.ints().take(slots);
        dev.write(slotRowBuf, slotRow, 0, slots);
        Buf slotOfBuf = p.ints().take(t * topK);
        dev.write(slotOfBuf, slotOf, 0, t * topK);
        Buf xs = p.floats().take((long) slots * hidden); // [slots, hidden]
        dev.gatherRows(x, slotRowBuf, slots, hidden, xs);
        Buf gu = p.floats().take((long) slots * 2 * inter); // [slots, gate | up]
        dev.gemmGrouped(xs, groupStart, groupRows, groups, hidden, gateUp, 2 * inter, gu, p.precision());
        Buf act = p.floats().take((long) slots * inter);
        dev.swiglu(gu, slots, inter, act);
        Buf ye = p.floats().take((long) slots * hidden); // [slots, hidden]
        dev.gemmGrouped(act, groupStart, groupRows, groups, inter, down, hidden, ye, p.precision());
        // y [T, hidden] = Σ_k weight[t, k] · ye[slot of (t, k)], experts in ascending id as the CPU sums them.
        Buf y = p.floats().take((long) t * hidden);
        dev.moeCombine(ye, slotOfBuf, weightsBuf, t, topK, hidden, y);
        if (sharedExperts != null) {
            dev.add(y, sharedExperts.forward(p, x, t), (long) t * hidden);
        }
        return y;
    }
}
