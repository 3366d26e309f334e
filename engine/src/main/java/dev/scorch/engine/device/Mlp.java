package dev.scorch.engine.device;

/**
 * SwiGLU MLP (the dense layers, each routed expert, the shared experts) on a device: its weights and shape, built once
 * per layer and passed to {@link Device#mlp} whole.
 *
 * @param gateUpProj   gate_proj and up_proj stacked, [2 · intermediate, hidden]
 * @param downProj     [hidden, intermediate]
 * @param hidden       hidden_size
 * @param inter        intermediate size
 */
public record Mlp(Buf gateUpProj, Buf downProj, int hidden, int inter) {
    static Mlp load(DeviceWeights w, String prefix, int hidden) {
        return new Mlp(
                w.stacked(prefix + "gate_proj.weight", prefix + "up_proj.weight"),
                w.linear(prefix + "down_proj.weight"),
                hidden,
                w.rows(prefix + "gate_proj.weight"));
    }

    /** SwiGLU MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), x [rows, hidden] → [rows, hidden]. */
    Buf forward(Pass p, Buf x, int rows) {
        Buf out = p.floats.take((long) rows * hidden);
        p.dev.mlp(this, x, rows, out, p.rules);
        return out;
    }
}
