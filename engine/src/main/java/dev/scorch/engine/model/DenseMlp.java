package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.Workspace;
import java.util.function.IntConsumer;

/** SwiGLU MLP (DeepseekV3MLP): down_proj(silu(gate_proj(x)) * up_proj(x)); also each expert and the shared experts. */
final class DenseMlp {
    private static final Workspace.Key GATE_UP =
            new Workspace.Key("mlp.gate_up"); // gate and up: [rows, intermediate] each
    private static final Workspace.Key CHUNK_X = new Workspace.Key("mlp.chunk_x"); // [chunk rows, hidden]
    private static final Workspace.Key CHUNK_OUT = new Workspace.Key("mlp.chunk_out"); // [chunk rows, hidden]
    // Rows per pass through the MLP (chunkRows): the [rows, intermediate] gate and up buffers hold at most CHUNK_FLOATS
    // each however long the batch, and at least ROW_CHUNK rows (= PackedGemm.MB; Kimi's dense layer, intermediate
    // 18432, and the small model's, 2816, take 256). An MLP as narrow as an expert (256) takes a 2,048-token batch in
    // one pass: GEMMs of 2,048 rows, which run in wider blocks, and no copies in and out of chunks. Each output row's
    // bits do not depend on its chunk.
    static final int ROW_CHUNK = 256;
    static final int CHUNK_FLOATS = 1 << 19;
    private static final Workspace.Key GROUP_GATE_UP =
            new Workspace.Key("mlp.group_gate_up"); // per MLP: [rows, intermediate] × 2
    private static final Workspace.Key GROUP_OUT = new Workspace.Key("mlp.group_out"); // per MLP: [rows, hidden]
    // The decode group's argument arrays (exact lengths: the matmuls read them): gate/up pairs, then down.
    private static final Workspace.Key GROUP_IN = new Workspace.Key("mlp.group_in"); // [2n] inputs
    private static final Workspace.Key GROUP_M = new Workspace.Key("mlp.group_m"); // [2n] rows
    private static final Workspace.Key GROUP_W = new Workspace.Key("mlp.group_w"); // [2n] gate_proj, up_proj
    private static final Workspace.Key GROUP_H = new Workspace.Key("mlp.group_h"); // [n] silu(gate) · up
    private static final Workspace.Key GROUP_DOWN = new Workspace.Key("mlp.group_down"); // [n] down_proj
    // One MLP's decode pass as a group of one.
    private static final Workspace.Key SELF = new Workspace.Key("mlp.self");
    private static final Workspace.Key SELF_X = new Workspace.Key("mlp.self_x");
    private static final Workspace.Key SELF_ROWS = new Workspace.Key("mlp.self_rows");
    private static final Workspace.Key SWIGLU = new Workspace.Key("mlp.swiglu"); // the SwiGlu items
    private static final Workspace.Key COPY_ROWS = new Workspace.Key("mlp.copy_rows"); // the CopyRows items

    private final Linear gateProj; // [intermediate, hidden]
    private final Linear upProj; // [intermediate, hidden]
    private final Linear downProj; // [hidden, intermediate]
    private final Linear[] gateUp; // {gate_proj, up_proj}: both read x, in one pass

    DenseMlp(ModelWeights w, String prefix) {
        gateProj = w.linear(prefix + "gate_proj.weight");
        upProj = w.linear(prefix + "up_proj.weight");
        downProj = w.linear(prefix + "down_proj.weight");
        gateUp = new Linear[] {gateProj, upProj};
    }

    /** x: [rows, hidden] → [rows, hidden], a new array. */
    float[] forward(float[] x, int rows, Ops ops) {
        float[] out = new float[rows * downProj.out()];
        forward(x, rows, Matmuls.prefill(ops), new Workspace(), out);
        return out;
    }

    /**
     * As above, each row through the matmul mm picks for it; activations live in ws; the result goes to out
     * ([rows, hidden]), which may be x: each row of x is read before its row of out is written.
     */
    void forward(float[] x, int rows, Matmuls mm, Workspace ws, float[] out) {
        int hidden = downProj.out();
        if (mm.allDecode()) {
            DenseMlp[] self = ws.exactArray(SELF, 1, DenseMlp[]::new);
            float[][] xs = ws.exactArray(SELF_X, 1, float[][]::new);
            int[] m = ws.exactInts(SELF_ROWS, 1);
            self[0] = this;
            xs[0] = x;
            m[0] = rows;
            System.arraycopy(forwardDecode(self, xs, m, mm.ops(), ws)[0], 0, out, 0, rows * hidden);
            return;
        }
        int chunk = chunkRows();
        if (rows <= chunk) {
            forwardRows(x, rows, mm, ws, out);
            return;
        }
        int in = gateProj.in();
        float[] xc = ws.floats(CHUNK_X, chunk * in);
        float[] yc = ws.floats(CHUNK_OUT, chunk * hidden);
        CopyRows copy = ws.object(COPY_ROWS, CopyRows::new);
        for (int r0 = 0; r0 < rows; r0 += chunk) {
            int n = Math.min(chunk, rows - r0);
            copy.copy(mm.ops(), x, r0, n, xc, 0, in);
            forwardRows(xc, n, mm.range(r0, r0 + n), ws, yc);
            copy.copy(mm.ops(), yc, 0, n, out, r0, hidden);
        }
    }

    /** Rows per pass through this MLP: see CHUNK_FLOATS. */
    int chunkRows() {
        return Math.max(ROW_CHUNK, CHUNK_FLOATS / gateProj.out());
    }

    /** x: [rows, hidden] → out [rows, hidden] in one pass (out may be x), each row through the matmul mm picks for it. */
    private void forwardRows(float[] x, int rows, Matmuls mm, Workspace ws, float[] out) {
        int inter = gateProj.out();
        float[][] gu = ws.floatRows(GATE_UP, 2, rows * inter);
        float[] g = gu[0];
        float[] u = gu[1];
        mm.apply(x, rows, gateUp, gu);
        SwiGlu act = ws.object(SWIGLU, SwiGlu::new);
        act.set(mm.ops(), g, u, inter);
        mm.ops().forEachRow(rows, act); // g = silu(g) · u, rows spread over the engine's threads
        act.clear();
        mm.apply(g, rows, downProj, out);
    }

    /**
     * Several MLPs (a decode step's experts), mlps[i] on x[i] [rows[i], hidden], through
     * {@link Ops#matmulDecode} in two grouped passes: gate_proj and up_proj of all, then down_proj of all. Each
     * result has the bits of mlps[i] run alone. Activations live in ws; so do the results (result i at least
     * [rows[i], hidden]).
     */
    static float[][] forwardDecode(DenseMlp[] mlps, float[][] x, int[] rows, Ops ops, Workspace ws) {
        int n = mlps.length;
        float[][] in = ws.exactArray(GROUP_IN, 2 * n, float[][]::new);
        int[] m = ws.exactInts(GROUP_M, 2 * n);
        Linear[] w = ws.exactArray(GROUP_W, 2 * n, Linear[]::new);
        int maxRows = 0;
        int maxInter = 0;
        int maxOut = 0;
        for (int i = 0; i < n; i++) {
            maxRows = Math.max(maxRows, rows[i]);
            maxInter = Math.max(maxInter, mlps[i].gateProj.out());
            maxOut = Math.max(maxOut, mlps[i].downProj.out());
        }
        float[][] gu = ws.floatRows(GROUP_GATE_UP, 2 * n, maxRows * maxInter);
        for (int i = 0; i < n; i++) {
            in[2 * i] = in[2 * i + 1] = x[i];
            m[2 * i] = m[2 * i + 1] = rows[i];
            w[2 * i] = mlps[i].gateProj;
            w[2 * i + 1] = mlps[i].upProj;
        }
        ops.matmulDecode(in, m, w, gu);
        float[][] h = ws.exactArray(GROUP_H, n, float[][]::new);
        Linear[] down = ws.exactArray(GROUP_DOWN, n, Linear[]::new);
        float[][] out = ws.floatRows(GROUP_OUT, n, maxRows * maxOut);
        for (int i = 0; i < n; i++) {
            float[] g = gu[2 * i];
            float[] u = gu[2 * i + 1];
            ops.siluMul(g, u, 0, rows[i] * mlps[i].gateProj.out());
            h[i] = g;
            down[i] = mlps[i].downProj;
        }
        ops.matmulDecode(h, rows, down, out);
        return out;
    }

    /** Item i: g = silu(g) · u over row i of [rows, inter]. One per workspace, set per use (no lambda per call). */
    private static final class SwiGlu implements IntConsumer {
        private Ops ops;
        private float[] g;
        private float[] u;
        private int inter;

        void set(Ops ops, float[] g, float[] u, int inter) {
            this.ops = ops;
            this.g = g;
            this.u = u;
            this.inter = inter;
        }

        void clear() {
            set(null, null, null, 0);
        }

        @Override
        public void accept(int i) {
            ops.siluMul(g, u, i * inter, inter);
        }
    }

    long activeWeightBytes() {
        return gateProj.weightBytes() + upProj.weightBytes() + downProj.weightBytes();
    }
}
