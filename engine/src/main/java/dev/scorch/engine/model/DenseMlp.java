package dev.scorch.engine.model;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.Workspace;
import java.util.function.IntConsumer;

/** SwiGLU MLP (DeepseekV3MLP): down_proj(silu(gate_proj(x)) * up_proj(x)); also each expert and the shared experts. */
final class DenseMlp {
    // Rows per pass through the MLP (chunkRows): the [rows, intermediate] gate and up buffers hold at most CHUNK_FLOATS
    // each however long the batch, and at least ROW_CHUNK rows (= PackedGemm.MB; Kimi's dense layer, intermediate
    // 18432, and the small model's, 2816, take 256). An MLP as narrow as an expert (256) takes a 2,048-token batch in
    // one pass: GEMMs of 2,048 rows, which run in wider blocks, and no copies in and out of chunks. Each output row's
    // bits do not depend on its chunk.
    static final int ROW_CHUNK = 256;
    static final int CHUNK_FLOATS = 1 << 19;

    /** A workspace's buffers for every MLP of the model (dense layers, experts, shared experts: one runs at a time). */
    static final class Scratch extends Workspace.Buffers {
        private float[][] gateUp; // gate and up: [rows, intermediate] each
        private float[] chunkX; // [chunk rows, hidden]
        private float[] chunkOut; // [chunk rows, hidden]
        private final CopyRows copy = new CopyRows();
        // The decode group: per MLP gate and up [rows, intermediate], and out [rows, hidden]; the matmuls' argument
        // arrays, exact lengths (they read them): inputs, rows and weights of the gate/up pairs [2n], then of down [n].
        private float[][] groupGateUp;
        private float[][] groupOut;
        private final Workspace.ByLength<float[][]> groupIn = new Workspace.ByLength<>(float[][]::new);
        private final Workspace.ByLength<int[]> groupM = new Workspace.ByLength<>(int[]::new);
        private final Workspace.ByLength<Linear[]> groupW = new Workspace.ByLength<>(Linear[]::new);
        private final Workspace.ByLength<float[][]> groupH = new Workspace.ByLength<>(float[][]::new);
        private final Workspace.ByLength<Linear[]> groupDown = new Workspace.ByLength<>(Linear[]::new);
        // One MLP's decode pass as a group of one.
        private final DenseMlp[] self = new DenseMlp[1];
        private final float[][] selfX = new float[1][];
        private final int[] selfRows = new int[1];
        // The SwiGLU pass's operands, read by its row body (made once: a pass makes no lambda).
        private Ops ops;
        private float[] g;
        private float[] u;
        private int inter;
        private final IntConsumer swiGluRow = i -> ops.siluMul(g, u, i * inter, inter);

        Scratch(Workspace ws) {
            super(ws);
        }

        /** g = silu(g) · u over [rows, inter], rows spread over ops' threads. */
        private void swiGlu(Ops ops, float[] g, float[] u, int rows, int inter) {
            this.ops = ops;
            this.g = g;
            this.u = u;
            this.inter = inter;
            ops.forEachRow(rows, swiGluRow);
        }
    }

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

    /**
     * x: [rows, hidden] → out [rows, hidden], each row through the matmul mm picks for it; activations live in s. out
     * may be x: each row of x is read before its row of out is written.
     */
    void forward(float[] x, int rows, Matmuls mm, Scratch s, float[] out) {
        int hidden = downProj.out();
        if (mm.allDecode()) {
            s.self[0] = this;
            s.selfX[0] = x;
            s.selfRows[0] = rows;
            System.arraycopy(forwardDecode(s.self, s.selfX, s.selfRows, mm.ops(), s)[0], 0, out, 0, rows * hidden);
            return;
        }
        int chunk = chunkRows();
        if (rows <= chunk) {
            forwardRows(x, rows, mm, s, out);
            return;
        }
        int in = gateProj.in();
        float[] xc = s.chunkX = s.floats(s.chunkX, chunk * in);
        float[] yc = s.chunkOut = s.floats(s.chunkOut, chunk * hidden);
        for (int r0 = 0; r0 < rows; r0 += chunk) {
            int n = Math.min(chunk, rows - r0);
            s.copy.copy(mm.ops(), x, r0, n, xc, 0, in);
            forwardRows(xc, n, mm.range(r0, r0 + n), s, yc);
            s.copy.copy(mm.ops(), yc, 0, n, out, r0, hidden);
        }
    }

    /** Rows per pass through this MLP: see CHUNK_FLOATS. */
    int chunkRows() {
        return Math.max(ROW_CHUNK, CHUNK_FLOATS / gateProj.out());
    }

    /** x: [rows, hidden] → out [rows, hidden] in one pass (out may be x), each row through the matmul mm picks for it. */
    private void forwardRows(float[] x, int rows, Matmuls mm, Scratch s, float[] out) {
        int inter = gateProj.out();
        float[][] gu = s.gateUp = s.floatRows(s.gateUp, 2, rows * inter);
        float[] g = gu[0];
        float[] u = gu[1];
        mm.apply(x, rows, gateUp, gu);
        s.swiGlu(mm.ops(), g, u, rows, inter); // g = silu(g) · u
        mm.apply(g, rows, downProj, out);
    }

    /**
     * Several MLPs (a decode step's experts), mlps[i] on x[i] [rows[i], hidden], through
     * {@link Ops#matmulDecode} in two grouped passes: gate_proj and up_proj of all, then down_proj of all. Each
     * result has the bits of mlps[i] run alone. Activations live in s; so do the results (result i at least
     * [rows[i], hidden]).
     */
    static float[][] forwardDecode(DenseMlp[] mlps, float[][] x, int[] rows, Ops ops, Scratch s) {
        int n = mlps.length;
        float[][] in = s.groupIn.get(2 * n);
        int[] m = s.groupM.get(2 * n);
        Linear[] w = s.groupW.get(2 * n);
        int maxRows = 0;
        int maxInter = 0;
        int maxOut = 0;
        for (int i = 0; i < n; i++) {
            maxRows = Math.max(maxRows, rows[i]);
            maxInter = Math.max(maxInter, mlps[i].gateProj.out());
            maxOut = Math.max(maxOut, mlps[i].downProj.out());
        }
        float[][] gu = s.groupGateUp = s.floatRows(s.groupGateUp, 2 * n, maxRows * maxInter);
        for (int i = 0; i < n; i++) {
            in[2 * i] = in[2 * i + 1] = x[i];
            m[2 * i] = m[2 * i + 1] = rows[i];
            w[2 * i] = mlps[i].gateProj;
            w[2 * i + 1] = mlps[i].upProj;
        }
        ops.matmulDecode(in, m, w, gu);
        float[][] h = s.groupH.get(n);
        Linear[] down = s.groupDown.get(n);
        float[][] out = s.groupOut = s.floatRows(s.groupOut, n, maxRows * maxOut);
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

    long activeWeightBytes() {
        return gateProj.weightBytes() + upProj.weightBytes() + downProj.weightBytes();
    }
}
