package dev.scorch.engine.device.cpu;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.KeyTiles;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.Mlp;
import dev.scorch.engine.device.MoeExperts;
import dev.scorch.engine.device.PassRules;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.device.host.HeapDevice;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.device.host.NoauxTcRouter;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LatentAttention;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.kernels.MlaInputs;
import dev.scorch.engine.kernels.RmsNorm;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.Workspace;
import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * {@link Device} on the CPU, running {@link CpuOps}' kernels (Vector API and native, or their scalar twins): buffers are heap arrays, weights the checkpoint's own tensors, memory-mapped in their dtype
 * ({@link Buf.Kind#LINEAR}) and decoded as they are multiplied. GEMMs follow {@link DecodeRows}: decode rows through
 * {@link CpuOps#matmulDecode}, the others through {@link CpuOps#matmul}. The MoE runs expert by expert over the tokens routed
 * to it (all of a decode step's experts and the shared experts as one group), and the absorbed attention decodes a head
 * of kv_b_proj once for every sequence of the step. Row work spreads over the ops' threads.
 *
 * <p>A device holds per-call scratch: one pass at a time (the model keeps one per workspace). Its kernels take whole
 * arrays, so its scratch is one array per slice ({@link #slicesScratch}). A call of a shape seen before allocates
 * nothing: arrays are kept, and each parallel loop's body is an object of the device's, its operands set per call.
 */
public final class CpuDevice extends HeapDevice {
    // Fresh sequences' keys and values are expanded from their latents in groups of whole sequences of up to this many
    // rows: 256 = PackedGemm.MB, the rows kv_b_proj runs per decode of its weights, so longer groups only add memory.
    static final int KV_GROUP_ROWS = 256;
    // Rows per pass through a dense MLP: its [rows, intermediate] activations hold at most CHUNK_FLOATS each however
    // long the batch, and at least ROW_CHUNK rows (= PackedGemm.MB). An MLP as narrow as an expert takes a 2,048-token
    // batch in one pass.
    static final int ROW_CHUNK = 256;
    static final int CHUNK_FLOATS = 1 << 19;

    private final CpuOps ops;
    private final RmsNorm.Rows norm = new RmsNorm.Rows();
    private final NoauxTcRouter.Scratch router = new NoauxTcRouter.Scratch();
    private final Scratch s = new Scratch();
    private final Group one = new Group(1); // an MLP alone
    private final Workspace.ByLength<Group> groups = new Workspace.ByLength<>(Group::new);
    private final CopyRows copyRows = new CopyRows();
    private final AddRows addRows = new AddRows();
    private final Add add = new Add();
    private final SiluRows siluRows = new SiluRows();
    private final RopeRows ropeRows = new RopeRows();
    private final DecodeItems decodeItems = new DecodeItems();
    private final Stats stats = new Stats();

    /** Scratch arrays, grown to the largest call and kept. */
    private static final class Scratch {
        // A stacked GEMM's outputs, one array per weight, kept per count of weights; partFloats counts their floats.
        final Workspace.ByLength<float[][]> parts = new Workspace.ByLength<>(float[][]::new);
        long partFloats;
        float[] u = new float[0]; // up_proj's output [rows, inter]
        int[] count = new int[0]; // [n_routed_experts]
        int[] rows = new int[0]; // an expert's tokens
        float[] rowWeight = new float[0];
        float[] xe = new float[0]; // an expert's tokens [rows, hidden], then its output
        float[] shared = new float[0]; // the shared experts' output [T, hidden]
        float[] g = new float[0]; // an MLP's gate [rows, inter]
        float[][] groupX = new float[0][]; // a decode step's experts' tokens
        float[][] groupGu = new float[0][];
        float[][] groupOut = new float[0][];
        float[] chunkX = new float[0]; // a chunk of a long batch's rows [chunk, hidden], in and out
        float[] chunkOut = new float[0];
        float[] groupLatent = new float[0]; // a group of fresh sequences' latents [rows, kv_lora_rank]
        float[] kv = new float[0]; // and their keys and values [rows, heads, qk_nope + v_head]
        int[] seqStart = new int[0]; // the prefill form's sequences
        int[] seqLen = new int[0];
        final Workspace.ByLength<int[]> groupStart = new Workspace.ByLength<>(int[]::new); // those of a kv group
        final Workspace.ByLength<int[]> groupLen = new Workspace.ByLength<>(int[]::new);
        MlaInputs[] groupInputs = new MlaInputs[0]; // each kv group's, kept while the same
    }

    /**
     * SwiGLU MLPs run as one group of matmuls (a decode step's experts hit and shared experts; an MLP alone), each array
     * [size] but the gate_proj and up_proj pass's, [2 · size]: gate then up of each.
     */
    private static final class Group {
        final int[] rows;
        final Linear[] down;
        final float[][] h; // silu(gate) · up of each: down_proj's input
        final float[][] out;
        final float[][] x2;
        final int[] rows2;
        final Linear[] gateUp2;
        final float[][] gu;

        Group(int n) {
            rows = new int[n];
            down = new Linear[n];
            h = new float[n][];
            out = new float[n][];
            x2 = new float[2 * n][];
            rows2 = new int[2 * n];
            gateUp2 = new Linear[2 * n];
            gu = new float[2 * n][];
        }

        /** MLP i: gate_proj and up_proj stacked in gateUp, down_proj in down, over x's rows. */
        Group set(int i, Buf gateUp, Buf down, float[] x, int rows) {
            Linear[] gu = (Linear[]) gateUp.storage();
            gateUp2[2 * i] = gu[0];
            gateUp2[2 * i + 1] = gu[1];
            x2[2 * i] = x2[2 * i + 1] = x;
            rows2[2 * i] = rows2[2 * i + 1] = rows;
            this.down[i] = ((Linear[]) down.storage())[0];
            this.rows[i] = rows;
            return this;
        }
    }

    public CpuDevice(CpuOps ops) {
        this.ops = ops;
    }

    public CpuOps ops() {
        return ops;
    }

    /** Bytes of the scratch arrays this device keeps between calls. */
    public long scratchBytes() {
        long n = (long) s.u.length + s.xe.length + s.shared.length + s.g.length + s.rowWeight.length;
        n += (long) s.count.length + s.rows.length;
        for (float[][] group : new float[][][] {s.groupX, s.groupGu, s.groupOut}) {
            for (float[] a : group) {
                n += a == null ? 0 : a.length;
            }
        }
        return 4 * (n + s.partFloats);
    }

    @Override
    public String describe() {
        return "CPU (" + ops.getClass().getSimpleName() + ")";
    }

    @Override
    public long totalBytes() {
        return Runtime.getRuntime().maxMemory();
    }

    @Override
    public long freeBytes() {
        Runtime r = Runtime.getRuntime();
        return r.maxMemory() - (r.totalMemory() - r.freeMemory());
    }

    @Override
    public boolean slicesScratch() {
        return false;
    }

    // --- Memory

    /** The checkpoint's tensors as they lie, whatever the precision: the kernels decode every dtype as they multiply. */
    @Override
    public Buf weight(GemmPrecision precision, Linear... stacked) {
        long n = 0;
        for (Linear w : stacked) {
            if (w.in() != stacked[0].in()) {
                throw new IllegalArgumentException(w.name() + ": in_features " + w.in() + ", not " + stacked[0].in()
                        + " like " + stacked[0].name());
            }
            n += (long) w.out() * w.in();
        }
        return new Buf(stacked.clone(), Buf.Kind.LINEAR, 0, n);
    }

    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        return weight(precision, stacked);
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        return new Buf(w.clone(), Buf.Kind.F32, 0, w.length);
    }

    @Override
    public Buf ropeTable(Rope rope, int positions, Buf previous) {
        float[] table = rope.table(positions); // the model's own, shared and grown in place of a copy
        return new Buf(table, Buf.Kind.F32, 0, table.length);
    }

    // --- GEMMs

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        gemm(x, m, k, w, n, y, precision, DecodeRows.NONE);
    }

    /**
     * y [m, n] = x · wᵀ, w {@link Buf.Kind#LINEAR}; weights stacked along out are multiplied in one pass where every row
     * is a prefill row, each into its own array, then laid side by side in y.
     */
    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision, DecodeRows rows) {
        Linear[] ws = linears(w, n, k);
        float[] xs = whole(x, (long) m * k, "gemm x");
        float[] ys = whole(y, (long) m * n, "gemm y");
        if (ws.length == 1) {
            matmul(xs, m, ws[0], ys, rows);
            return;
        }
        float[][] parts = s.parts.get(ws.length);
        for (int g = 0; g < ws.length; g++) {
            int need = m * ws[g].out();
            if (parts[g] == null || parts[g].length < need) {
                s.partFloats += need - (parts[g] == null ? 0 : parts[g].length);
                parts[g] = new float[need];
            }
        }
        matmul(xs, m, ws, parts, rows);
        for (int g = 0, col = 0; g < ws.length; col += ws[g++].out()) {
            copyRows.copy(m, parts[g], 0, ws[g].out(), ys, col, n, ws[g].out());
        }
    }

    /** y[m, out] = x[m, in] · Wᵀ, each row through its own path (see {@link DecodeRows}). */
    public void matmul(float[] x, int m, Linear w, float[] y, DecodeRows rows) {
        if (rows.noDecode()) {
            ops.matmul(x, m, w, y);
            return;
        }
        if (rows.allDecode()) {
            ops.matmulDecode(x, m, w, y);
            return;
        }
        // Mixed: gather each path's rows, run it, scatter the results back.
        int in = w.in();
        int out = w.out();
        for (boolean path : new boolean[] {true, false}) {
            int count = 0;
            for (int i = 0; i < m; i++) {
                count += rows.decode(i) == path ? 1 : 0;
            }
            if (count == 0) {
                continue;
            }
            float[] xs = new float[count * in];
            float[] ys = new float[count * out];
            for (int i = 0, j = 0; i < m; i++) {
                if (rows.decode(i) == path) {
                    System.arraycopy(x, i * in, xs, j++ * in, in);
                }
            }
            if (path) {
                ops.matmulDecode(xs, count, w, ys);
            } else {
                ops.matmul(xs, count, w, ys);
            }
            for (int i = 0, j = 0; i < m; i++) {
                if (rows.decode(i) == path) {
                    System.arraycopy(ys, j++ * out, y, i * out, out);
                }
            }
        }
    }

    /** y[g] = x · w[g]ᵀ for weights sharing the input x [m, in]: one pass when every row is a prefill row. */
    private void matmul(float[] x, int m, Linear[] w, float[][] y, DecodeRows rows) {
        if (rows.noDecode()) {
            ops.matmul(x, m, w, y);
            return;
        }
        for (int g = 0; g < w.length; g++) {
            matmul(x, m, w[g], y[g], rows);
        }
    }

    /** A long batch a chunk of rows at a time (see CHUNK_FLOATS); a decode step's as one group of matmuls. */
    @Override
    public void mlp(Mlp w, Buf x, int m, Buf out, PassRules pass) {
        int hidden = w.hidden();
        mlpChunks(
                whole(x, (long) m * hidden, "mlp x"),
                m,
                hidden,
                w.gateUpProj(),
                w.downProj(),
                pass.rows(),
                whole(out, (long) m * hidden, "mlp out"));
    }

    /** {@link #mlp(float[], int, Buf, Buf, DecodeRows, float[])} a chunk of rows at a time; out may be x. */
    private void mlpChunks(float[] xs, int m, int hidden, Buf gateUp, Buf down, DecodeRows rows, float[] ys) {
        int chunk = Math.max(ROW_CHUNK, CHUNK_FLOATS / ((Linear[]) gateUp.storage())[0].out());
        if (rows.allDecode() || m <= chunk) {
            mlp(xs, m, gateUp, down, rows, ys);
            return;
        }
        float[] xc = s.chunkX = grow(s.chunkX, chunk * hidden);
        float[] yc = s.chunkOut = grow(s.chunkOut, chunk * hidden);
        for (int r0 = 0; r0 < m; r0 += chunk) {
            int n = Math.min(chunk, m - r0);
            copyRows.copy(n, xs, r0 * hidden, hidden, xc, 0, hidden, hidden);
            mlp(xc, n, gateUp, down, rows.range(r0, r0 + n), yc);
            copyRows.copy(n, yc, 0, hidden, ys, r0 * hidden, hidden, hidden);
        }
    }

    /**
     * Keys and values expanded a group of whole fresh sequences at a time, at most KV_GROUP_ROWS rows unless one
     * sequence is longer (rows between them, a cached sequence's, are expanded too and not attended): the expanded keys
     * and values of the whole batch (64 KiB a row for Kimi K2) never exist at once. Each row's bits do not depend on
     * its group.
     */
    @Override
    public void mlaPrefill(
            Buf q, Buf latent, Buf kPe, Buf kvBProj, KeyTiles keys, MlaShape shape, Buf out, PassRules pass) {
        int t = keys.t();
        int heads = shape.heads();
        int kvLoraRank = shape.kvLoraRank();
        Linear w = linears(kvBProj, heads * shape.kvHead(), kvLoraRank)[0];
        float[] qs = whole(q, (long) t * heads * shape.qHead(), "mlaPrefill q");
        float[] lat = whole(latent, (long) t * kvLoraRank, "mlaPrefill latent");
        float[] kp = whole(kPe, (long) t * shape.qkRope(), "mlaPrefill kPe");
        float[] os = whole(out, (long) t * heads * shape.vHead(), "mlaPrefill out");
        int seqs = sequences(keys);
        int[] start = s.seqStart;
        int[] len = s.seqLen;
        int longest = 0;
        for (int i = 0; i < seqs; i++) {
            longest = Math.max(longest, len[i]);
        }
        int cap = Math.max(KV_GROUP_ROWS, longest);
        float[] groupLatent = s.groupLatent = grow(s.groupLatent, cap * kvLoraRank); // [group rows, kv_lora_rank]
        float[] kv = s.kv = grow(s.kv, cap * heads * shape.kvHead()); // [group rows, heads, k_nope | v]
        for (int g0 = 0, g1, group = 0; g0 < seqs; g0 = g1, group++) {
            int row0 = start[g0];
            g1 = g0 + 1;
            while (g1 < seqs && start[g1] + len[g1] - row0 <= cap) {
                g1++;
            }
            int n = start[g1 - 1] + len[g1 - 1] - row0;
            System.arraycopy(lat, row0 * kvLoraRank, groupLatent, 0, n * kvLoraRank);
            ops.matmul(groupLatent, n, w, kv); // the attended rows are prefill rows
            int[] groupStart = s.groupStart.get(g1 - g0);
            int[] groupLen = s.groupLen.get(g1 - g0);
            System.arraycopy(start, g0, groupStart, 0, g1 - g0);
            System.arraycopy(len, g0, groupLen, 0, g1 - g0);
            if (s.groupInputs.length <= group) {
                s.groupInputs = Arrays.copyOf(s.groupInputs, group + 1);
            }
            MlaInputs in = s.groupInputs[group]; // a record per group only while the operands change
            if (in == null
                    || in.q() != qs
                    || in.kv() != kv
                    || in.kPe() != kp
                    || in.seqStart() != groupStart
                    || in.seqLen() != groupLen
                    || in.kvRow0() != row0
                    || in.heads() != heads
                    || in.qkNope() != shape.qkNope()
                    || in.qkRope() != shape.qkRope()
                    || in.vHead() != shape.vHead()
                    || in.scale() != shape.scale()) {
                in = s.groupInputs[group] = new MlaInputs(
                        qs,
                        kv,
                        kp,
                        heads,
                        shape.qkNope(),
                        shape.qkRope(),
                        shape.vHead(),
                        groupStart,
                        groupLen,
                        shape.scale(),
                        row0);
            }
            ops.attention(in, os);
        }
    }

    // --- MoE

    /**
     * Tokens grouped per expert, experts in ascending id, each expert one SwiGLU MLP over its tokens (its rows keep
     * their own rule), each token's weighted output added into y as its experts come, then the shared experts'. A decode
     * step runs every expert hit and the shared experts as one group of matmuls (two parallel passes in all), summed in
     * the same order.
     */
    @Override
    public void moeExperts(Buf x, int t, Buf experts, Buf weights, MoeExperts moe, Buf y, PassRules pass) {
        int hidden = moe.shape().hidden();
        int topK = moe.shape().numExpertsPerTok();
        Buf[] gateUp = moe.gateUp();
        Buf[] down = moe.down();
        DecodeRows rows = pass.rows();
        float[] xs = whole(x, (long) t * hidden, "moeExperts x");
        int[] chosen = whole(experts, (long) t * topK);
        float[] weight = whole(weights, (long) t * topK, "moeExperts weights");
        float[] ys = whole(y, (long) t * hidden, "moeExperts y");
        int nExperts = gateUp.length;
        // Tokens per expert, in token order: the rows each expert's GEMM runs over.
        int[] count = s.count = grow(s.count, nExperts);
        Arrays.fill(count, 0, nExperts, 0);
        for (int i = 0; i < t * topK; i++) {
            count[chosen[i]]++;
        }
        int maxCount = 0; // the busiest expert's tokens: buffers are sized once for it, not grown expert by expert
        for (int e = 0; e < nExperts; e++) {
            maxCount = Math.max(maxCount, count[e]);
        }
        Arrays.fill(ys, 0, t * hidden, 0f);
        if (rows.allDecode()) {
            moeDecode(xs, t, chosen, weight, maxCount, moe, ys);
            return;
        }
        int[] tokens = s.rows = grow(s.rows, maxCount);
        float[] tokenWeight = s.rowWeight = grow(s.rowWeight, maxCount);
        float[] xe = s.xe = grow(s.xe, maxCount * hidden); // [tokens of e, hidden]
        for (int e = 0; e < nExperts; e++) {
            if (count[e] == 0) {
                continue;
            }
            int n = tokensOf(e, chosen, weight, t, topK, tokens, tokenWeight, 0);
            copyRows.gather(n, xs, tokens, 0, hidden, xe);
            mlpChunks(xe, n, hidden, gateUp[e], down[e], rows.rows(tokens, n), xe); // e's tokens, then output
            addRows.run(n, xe, tokens, 0, tokenWeight, hidden, ys); // each token of e is a different row of y
        }
        if (moe.shared() != null) {
            float[] shared = s.shared = grow(s.shared, t * hidden);
            mlpChunks(xs, t, hidden, moe.shared().gateUpProj(), moe.shared().downProj(), rows, shared);
            add.run(ys, 0, shared, 0, t * hidden);
        }
    }

    /** SwiGLU MLP out [m, hidden] = down(silu(gate(x)) · up(x)); out may be x (x is read before out is written). */
    private void mlp(float[] x, int m, Buf gateUp, Buf down, DecodeRows rows, float[] out) {
        Group mlp = one.set(0, gateUp, down, x, m);
        int inter = mlp.gateUp2[0].out();
        float[] g = mlp.gu[0] = s.g = grow(s.g, m * inter);
        float[] u = mlp.gu[1] = s.u = grow(s.u, m * inter);
        // g = silu(x · gateᵀ) · (x · upᵀ) [m, inter]: a decode step's one grouped pass, else one GEMM pass
        if (rows.allDecode()) {
            ops.matmulDecode(mlp.x2, mlp.rows2, mlp.gateUp2, mlp.gu);
        } else {
            matmul(x, m, mlp.gateUp2, mlp.gu, rows);
        }
        siluRows.run(m, g, u, inter);
        matmul(g, m, mlp.down[0], out, rows);
    }

    /**
     * The decode step's experts and shared experts as one group of matmuls, then summed as the prefill path sums: x [t,
     * hidden], the tokens' experts and weights [t, top_k], s.count each expert's tokens, maxCount the most of them.
     */
    private void moeDecode(float[] x, int t, int[] chosen, float[] weight, int maxCount, MoeExperts moe, float[] y) {
        int hidden = moe.shape().hidden();
        int topK = moe.shape().numExpertsPerTok();
        int[] count = s.count;
        Buf[] gateUp = moe.gateUp();
        Buf[] down = moe.down();
        Mlp shared = moe.shared();
        int hit = 0;
        for (int e = 0; e < gateUp.length; e++) {
            hit += count[e] > 0 ? 1 : 0;
        }
        Group group = groups.get(hit + (shared != null ? 1 : 0));
        if (s.groupX.length < hit) {
            s.groupX = Arrays.copyOf(s.groupX, hit);
        }
        // Hit g's tokens are tokens[base .. base + rows[g]) in turn, with their router weights.
        int[] tokens = s.rows = grow(s.rows, t * topK);
        float[] tokenWeight = s.rowWeight = grow(s.rowWeight, t * topK);
        for (int e = 0, g = 0, base = 0; e < gateUp.length; e++) {
            if (count[e] == 0) {
                continue;
            }
            tokensOf(e, chosen, weight, t, topK, tokens, tokenWeight, base);
            float[] xe = s.groupX[g] = grow(s.groupX[g], pow2(maxCount) * hidden); // [tokens of e, hidden]
            copyRows.gather(count[e], x, tokens, base, hidden, xe);
            group.set(g++, gateUp[e], down[e], xe, count[e]);
            base += count[e];
        }
        if (shared != null) {
            group.set(hit, shared.gateUpProj(), shared.downProj(), x, t);
        }
        expertsDecode(group);
        for (int g = 0, base = 0; g < hit; base += group.rows[g++]) {
            addRows.run(group.rows[g], group.out[g], tokens, base, tokenWeight, hidden, y);
        }
        if (shared != null) {
            add.run(y, 0, group.out[hit], 0, t * hidden);
        }
    }

    /** The tokens routed to expert e, in token order, and their router weights into tokens and tokenWeight from base. */
    private static int tokensOf(
            int e, int[] chosen, float[] weight, int t, int topK, int[] tokens, float[] tokenWeight, int base) {
        int n = base;
        for (int i = 0; i < t; i++) {
            for (int k = 0; k < topK; k++) {
                if (chosen[i * topK + k] == e) {
                    tokens[n] = i;
                    tokenWeight[n++] = weight[i * topK + k];
                }
            }
        }
        return n - base;
    }

    /**
     * A group of SwiGLU MLPs through {@link CpuOps#matmulDecode} in two grouped passes (gate_proj and up_proj of all, then
     * down_proj of all) into group.out; each result has the bits of its MLP run alone.
     */
    private void expertsDecode(Group group) {
        int n = group.rows.length;
        if (s.groupGu.length < 2 * n) {
            s.groupGu = Arrays.copyOf(s.groupGu, 2 * n);
        }
        if (s.groupOut.length < n) {
            s.groupOut = Arrays.copyOf(s.groupOut, n);
        }
        for (int i = 0; i < n; i++) {
            int cap = pow2(group.rows[i]);
            for (int j = 2 * i; j < 2 * i + 2; j++) {
                group.gu[j] = s.groupGu[j] = grow(s.groupGu[j], cap * group.gateUp2[j].out());
            }
            group.out[i] = s.groupOut[i] = grow(s.groupOut[i], cap * group.down[i].out());
        }
        ops.matmulDecode(group.x2, group.rows2, group.gateUp2, group.gu);
        for (int i = 0; i < n; i++) {
            ops.siluMul(group.gu[2 * i], group.gu[2 * i + 1], 0, group.rows[i] * group.gateUp2[2 * i].out());
            group.h[i] = group.gu[2 * i];
        }
        ops.matmulDecode(group.h, group.rows, group.down, group.out);
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        HostDevice.permute(experts, t, topK, nExperts, offsets, slotOf, slotRow);
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        HostDevice.combine(ye, slot, weights, tokens, topK, width, addend, y);
    }

    @Override
    protected NoauxTcRouter.Scratch routerScratch() {
        return router;
    }

    // --- Norms, RoPE, element-wise

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out) {
        norm.apply(
                ops,
                floats(x),
                rows,
                stride,
                off(x) + offset,
                dim,
                whole(weight, dim, "rmsNorm weight"),
                eps,
                whole(out, (long) rows * dim, "rmsNorm out"));
    }

    @Override
    public void rope(Buf x, int rows, int heads, int rowStride, int headStride, int offset, int ropeDim, Rotary r) {
        ropeRows.run(rows, x, heads, rowStride, headStride, offset, ropeDim, r);
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        float[] from = floats(src);
        float[] to = floats(dst);
        for (int r = 0; r < rows; r++) {
            System.arraycopy(from, off(src) + r * srcStride + srcOff, to, off(dst) + r * dstStride + dstOff, width);
        }
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        add.run(floats(x), off(x), floats(y), off(y), Math.toIntExact(n));
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        float[] in = floats(gu);
        float[] g = s.g = grow(s.g, rows * inter);
        float[] u = s.u = grow(s.u, rows * inter);
        for (int r = 0; r < rows; r++) {
            System.arraycopy(in, off(gu) + r * 2 * inter, g, r * inter, inter);
            System.arraycopy(in, off(gu) + r * 2 * inter + inter, u, r * inter, inter);
        }
        ops.forEachRow(rows, i -> ops.siluMul(g, u, i * inter, inter));
        write(out, g, 0, rows * inter);
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        int[] rs = ints(rows);
        float[] os = floats(out);
        if (x.kind() == Buf.Kind.LINEAR) {
            Linear table = linears(x, -1, width)[0];
            for (int j = 0; j < n; j++) {
                table.row(rs[off(rows) + j], 0, width, os, off(out) + j * width);
            }
            return;
        }
        for (int j = 0; j < n; j++) {
            System.arraycopy(floats(x), off(x) + rs[off(rows) + j] * width, os, off(out) + j * width, width);
        }
    }

    // --- Attention

    /** The tiles' sequences (runs of tiles with one key start) through {@link CpuOps#attention}. */
    @Override
    public void mlaAttention(Buf q, Buf kv, Buf kPe, KeyTiles keys, MlaShape shape, Buf out) {
        int seqs = sequences(keys);
        int t = keys.t();
        int heads = shape.heads();
        ops.attention(
                new MlaInputs(
                        whole(q, (long) t * heads * shape.qHead(), "mlaAttention q"),
                        whole(kv, (long) t * heads * shape.kvHead(), "mlaAttention kv"),
                        whole(kPe, (long) t * shape.qkRope(), "mlaAttention kPe"),
                        heads,
                        shape.qkNope(),
                        shape.qkRope(),
                        shape.vHead(),
                        Arrays.copyOf(s.seqStart, seqs),
                        Arrays.copyOf(s.seqLen, seqs),
                        shape.scale(),
                        0),
                whole(out, (long) t * heads * shape.vHead(), "mlaAttention out"));
    }

    /**
     * The tiles' sequences in order, a sequence being a run of tiles with one key start: their first rows and lengths
     * into s.seqStart and s.seqLen; returns how many.
     */
    private int sequences(KeyTiles keys) {
        Buf tiles = keys.tiles();
        Buf keyStart = keys.keyStart();
        int numTiles = keys.numTiles();
        int[] ts = ints(tiles);
        int[] ks = ints(keyStart);
        int[] start = s.seqStart = grow(s.seqStart, numTiles);
        int[] len = s.seqLen = grow(s.seqLen, numTiles);
        int seqs = 0;
        for (int tile = 0; tile < numTiles; tile++) {
            int q0 = ts[off(tiles) + 2 * tile];
            int end = q0 + ts[off(tiles) + 2 * tile + 1];
            int s0 = ks[off(keyStart) + q0];
            if (seqs > 0 && start[seqs - 1] == s0) {
                len[seqs - 1] = end - s0;
            } else {
                if (q0 != s0) {
                    throw new IllegalArgumentException(
                            "attention tile at query " + q0 + " does not start its sequence");
                }
                start[seqs] = s0;
                len[seqs++] = end - s0;
            }
        }
        return seqs;
    }

    @Override
    public void mlaDecode(Buf q, int rows, Buf cache, int past, Buf kvBProj, MlaShape shape, Buf out) {
        mlaDecode(q, new int[] {0}, new int[] {rows}, new Buf[] {cache}, new int[] {past}, kvBProj, shape, out);
    }

    /** A decode step's rows, each its own sequence, as one call: one parallel pass over every row's heads. */
    @Override
    public void mlaDecodeRows(Buf q, int rows, Buf caches, Buf lengths, Buf kvBProj, MlaShape s, Buf out) {
        DecodeItems d = decodeItems;
        if (d.stepRows.length != rows) { // sized to the step (made again only when its row count changes)
            d.stepRows = new int[rows];
            d.stepStart = new int[rows];
            d.stepPast = new int[rows];
            d.stepCaches = new Buf[rows];
        }
        int[] lens = ints(lengths);
        for (int r = 0; r < rows; r++) {
            d.stepStart[r] = r;
            d.stepRows[r] = 1;
            d.stepPast[r] = lens[off(lengths) + r];
            d.stepCaches[r] = cache(caches, r);
        }
        try {
            mlaDecode(q, d.stepStart, d.stepRows, d.stepCaches, d.stepPast, kvBProj, s, out);
        } finally {
            Arrays.fill(d.stepCaches, null);
        }
    }

    /**
     * One work item per (group of heads, sequence), head-major. With BF16 kv_b_proj in place, a group of heads attends
     * over one pass of the sequence's cache (which every head reads); otherwise the group is one head, which a thread
     * decodes once for the run of sequences it takes ({@link LatentAttention#head}: the heap holds one head's weights
     * per thread, never an fp32 kv_b_proj). Each head's sums in a fixed order, whatever its group.
     */
    @Override
    public void mlaDecode(
            Buf q, int[] rowStart, int[] rows, Buf[] caches, int[] past, Buf kvBProj, MlaShape shape, Buf out) {
        for (int b = 0; b < rows.length; b++) {
            whole(caches[b], (long) (past[b] + rows[b]) * shape.kvAWidth(), "mlaDecode cache");
        }
        DecodeItems d = decodeItems;
        d.w = linears(kvBProj, shape.heads() * shape.kvHead(), shape.kvLoraRank())[0];
        d.q = q;
        d.rowStart = rowStart;
        d.rows = rows;
        d.caches = caches;
        d.past = past;
        d.shape = shape;
        d.out = out;
        d.inPlace = ops.simd() && LatentAttention.attendsInPlace(d.w);
        LatentAttention.Head known = d.nativeShape;
        if (d.inPlace
                && (known == null
                        || known.qkNope() != shape.qkNope()
                        || known.qkRope() != shape.qkRope()
                        || known.vHead() != shape.vHead()
                        || known.rank() != shape.kvLoraRank()
                        || Float.floatToRawIntBits(known.scale()) != Float.floatToRawIntBits(shape.scale()))) {
            d.nativeShape = new LatentAttention.Head(
                    null,
                    0,
                    shape.qkNope(),
                    shape.qkRope(),
                    shape.vHead(),
                    shape.kvLoraRank(),
                    shape.scale()); // once per model
        }
        int heads = shape.heads();
        // In place, a group of heads shares each pass over the cache: as few groups as keep the threads fed (two
        // items a thread), their q_latents within 16 KiB (L1, beside the cache rows they meet). Each head's bits are
        // the same whatever its group.
        int most = Math.max(1, Math.min(heads, 4096 / shape.kvLoraRank()));
        d.group = d.inPlace ? Math.max(1, Math.min(most, rows.length * heads / (2 * ops.threads()))) : 1;
        try {
            ops.forEachRow(rows.length * ((heads + d.group - 1) / d.group), d);
        } finally {
            d.caches = null; // a sequence's cache is not kept alive by the device
        }
    }

    // --- Scores

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        HostDevice.stats(logits, rows, vocab, targets, stats);
    }

    /**
     * The stats on the logits in place, rows spread over the threads: each row's log-sum-exp by {@link CpuOps#logSumExp}
     * (kept in double), its argmax by {@link LogSoftmax#argmax}.
     */
    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats, double[] out) {
        Stats st = this.stats;
        st.logits = floats(logits);
        st.off = off(logits);
        st.vocab = vocab;
        st.targets = ints(targets);
        st.targetsOff = off(targets);
        st.out = out;
        try {
            ops.forEachRow(rows, st);
        } finally {
            st.logits = null;
            st.out = null;
        }
    }

    @Override
    public void synchronize() {}

    @Override
    public void close() {}

    // --- Row bodies: the parallel loops' bodies, kept with the device (one call at a time) with their operands set per
    // call, so that a call makes no lambda.

    /** A logits row's stats ({@link #logSoftmaxStats(Buf, int, int, Buf, Buf, double[])}). */
    private final class Stats implements IntConsumer {
        private float[] logits;
        private int[] targets;
        private double[] out;
        private int off, vocab, targetsOff;

        @Override
        public void accept(int r) {
            int o = off + r * vocab;
            int target = targets[targetsOff + r];
            out[3 * r] = ops.logSumExp(logits, o, vocab);
            out[3 * r + 1] = target >= 0 ? logits[o + target] : 0f;
            out[3 * r + 2] = LogSoftmax.argmax(logits, o, vocab);
        }
    }

    /** Rows of width floats copied between arrays, spread over the threads. */
    private final class CopyRows implements IntConsumer {
        private float[] src;
        private float[] dst;
        private int[] from; // gather: source row indices, from fromOff; null for strided rows
        private int srcOff, srcStride, dstOff, dstStride, width, fromOff;

        /** dst [dstOff + r · dstStride, + width) = src [srcOff + r · srcStride, + width) for r in [0, rows). */
        void copy(int rows, float[] src, int srcOff, int srcStride, float[] dst, int dstOff, int dstStride, int width) {
            set(src, srcOff, srcStride, dst, dstOff, dstStride, width);
            this.from = null;
            ops.forEachRow(rows, this);
        }

        /** dst row r = src row from[fromOff + r] for r in [0, rows), rows of width floats. */
        void gather(int rows, float[] src, int[] from, int fromOff, int width, float[] dst) {
            set(src, 0, width, dst, 0, width, width);
            this.from = from;
            this.fromOff = fromOff;
            ops.forEachRow(rows, this);
        }

        private void set(float[] src, int srcOff, int srcStride, float[] dst, int dstOff, int dstStride, int width) {
            this.src = src;
            this.srcOff = srcOff;
            this.srcStride = srcStride;
            this.dst = dst;
            this.dstOff = dstOff;
            this.dstStride = dstStride;
            this.width = width;
        }

        @Override
        public void accept(int r) {
            int row = from == null ? r : from[fromOff + r];
            System.arraycopy(src, srcOff + row * srcStride, dst, dstOff + r * dstStride, width);
        }
    }

    /**
     * y row to[toOff + j] += weight[toOff + j] · x row j, rows of width floats: one expert's outputs into the tokens
     * routed to it, each a different row of y, so rows spread over the threads.
     */
    private final class AddRows implements IntConsumer {
        private float[] x;
        private float[] weight;
        private float[] y;
        private int[] to;
        private int toOff, width;

        void run(int rows, float[] x, int[] to, int toOff, float[] weight, int width, float[] y) {
            this.x = x;
            this.to = to;
            this.toOff = toOff;
            this.weight = weight;
            this.width = width;
            this.y = y;
            ops.forEachRow(rows, this);
        }

        @Override
        public void accept(int j) {
            int yo = to[toOff + j] * width;
            float wj = weight[toOff + j];
            for (int d = 0; d < width; d++) {
                y[yo + d] += wj * x[j * width + d];
            }
        }
    }

    /** x[xOff + i] += y[yOff + i] for i in [0, n), in chunks over the threads. */
    private final class Add implements IntConsumer {
        private static final int CHUNK = 4096;
        private float[] x;
        private float[] y;
        private int xOff, yOff, n;

        void run(float[] x, int xOff, float[] y, int yOff, int n) {
            this.x = x;
            this.xOff = xOff;
            this.y = y;
            this.yOff = yOff;
            this.n = n;
            ops.forEachRow((n + CHUNK - 1) / CHUNK, this);
        }

        @Override
        public void accept(int c) {
            for (int i = c * CHUNK; i < Math.min(n, (c + 1) * CHUNK); i++) {
                x[xOff + i] += y[yOff + i];
            }
        }
    }

    /** g row i = silu(g row i) · u row i, rows of inter floats. */
    private final class SiluRows implements IntConsumer {
        private float[] g;
        private float[] u;
        private int inter;

        void run(int rows, float[] g, float[] u, int inter) {
            this.g = g;
            this.u = u;
            this.inter = inter;
            ops.forEachRow(rows, this);
        }

        @Override
        public void accept(int i) {
            ops.siluMul(g, u, i * inter, inter);
        }
    }

    /** {@link #rope}'s rows. */
    private final class RopeRows implements IntConsumer {
        private float[] x;
        private float[] cosSin;
        private int[] positions;
        private int xOff, posOff, csOff, heads, rowStride, headStride, ropeDim;

        void run(int rows, Buf x, int heads, int rowStride, int headStride, int offset, int ropeDim, Rotary r) {
            Buf positions = r.positions();
            Buf cosSin = r.cosSin();
            this.x = floats(x);
            this.xOff = off(x) + offset;
            this.positions = ints(positions);
            this.posOff = off(positions);
            this.cosSin = floats(cosSin);
            this.csOff = off(cosSin);
            this.heads = heads;
            this.rowStride = rowStride;
            this.headStride = headStride;
            this.ropeDim = ropeDim;
            ops.forEachRow(rows, this);
        }

        @Override
        public void accept(int r) {
            int c0 = csOff + positions[posOff + r] * ropeDim;
            for (int h = 0; h < heads; h++) {
                Rope.rotate(x, xOff + r * rowStride + h * headStride, ropeDim, cosSin, c0);
            }
        }
    }

    /**
     * {@link #mlaDecode}'s work items: item = head · sequences + sequence, so a thread decodes a head of kv_b_proj once
     * for the run of sequences it takes.
     */
    private final class DecodeItems implements IntConsumer {
        private Linear w;
        private Buf q;
        private Buf out;
        private Buf[] caches;
        private int[] rowStart, rows, past;
        private MlaShape shape;
        private boolean inPlace; // BF16 kv_b_proj read in place by the native kernel
        private int group; // heads an item takes: in place, several over one pass of the cache; else one
        private int[] stepStart = new int[0], stepRows = new int[0], stepPast = new int[0]; // mlaDecodeRows' arrays
        private Buf[] stepCaches = new Buf[0];
        private LatentAttention.Head
                nativeShape; // the dimensions the native kernel takes, kept while they stay the same

        @Override
        public void accept(int item) {
            int seqs = rows.length;
            int b = item % seqs;
            int h0 = item / seqs * group;
            int heads = shape.heads();
            int n = Math.min(group, heads - h0);
            int qHead = shape.qHead();
            int vHead = shape.vHead();
            int width = shape.kvAWidth();
            float[] cache = floats(caches[b]);
            float[] qs = floats(q);
            float[] os = floats(out);
            LatentAttention.Scratch scratch = LatentAttention.scratch();
            for (int i = 0; i < rows[b]; i++) {
                int row = rowStart[b] + i;
                int len = past[b] + i + 1; // causal: the cache before this pass, then new tokens up to i
                int qOff = off(q) + (row * heads + h0) * qHead;
                int oOff = off(out) + (row * heads + h0) * vHead;
                if (!inPlace
                        || !LatentAttention.attendInPlace(
                                w, h0, n, nativeShape, qs, qOff, cache, width, len, os, oOff, scratch)) {
                    for (int h = h0; h < h0 + n; h++) { // the heads' rows cross a mapping border: decoded in Java
                        attendDecoded(h, qs, qOff + (h - h0) * qHead, cache, width, len, os, oOff + (h - h0) * vHead);
                    }
                }
            }
        }

        /** Head h of one query row by the Java kernels, its kv_b_proj rows decoded to fp32 (kept for the next row). */
        private void attendDecoded(
                int h, float[] qs, int qOff, float[] cache, int width, int len, float[] os, int oOff) {
            boolean simd = ops.simd();
            LatentAttention.Scratch scratch = LatentAttention.scratch();
            LatentAttention.Head head = LatentAttention.head(
                    w, h, shape.qkNope(), shape.qkRope(), shape.vHead(), shape.scale(), simd, scratch);
            if (simd) {
                LatentAttention.attendVector(head, qs, qOff, cache, width, len, os, oOff, scratch);
            } else {
                LatentAttention.attendScalar(head, qs, qOff, cache, width, len, os, oOff, scratch);
            }
        }
    }

    // --- Buffers

    /** w's weights, checked to be [n, k] in all (n &lt; 0: any rows). */
    private static Linear[] linears(Buf w, int n, int k) {
        if (!(w.storage() instanceof Linear[] ls)) {
            throw new IllegalArgumentException(
                    "the CPU device multiplies checkpoint weights, not a " + w.kind() + " buffer");
        }
        int rows = 0;
        for (Linear l : ls) {
            if (l.in() != k) {
                throw new IllegalArgumentException(l.name() + ": in_features " + l.in() + ", not " + k);
            }
            rows += l.out();
        }
        if (n >= 0 && rows != n) {
            throw new IllegalArgumentException("weights of " + rows + " rows where " + n + " were asked for");
        }
        return ls;
    }

    /** b's array, which the kernels take whole: b must start it and hold n floats. */
    private static float[] whole(Buf b, long n, String what) {
        b.need(Buf.Kind.F32, n, what);
        if (b.offset() != 0) {
            throw new IllegalArgumentException(
                    what + ": the CPU kernels take a buffer from its start, not at " + b.offset());
        }
        return floats(b);
    }

    private static int[] whole(Buf b, long n) {
        b.need(Buf.Kind.I32, n, "int buffer");
        if (b.offset() != 0) {
            throw new IllegalArgumentException("the CPU kernels take a buffer from its start, not at " + b.offset());
        }
        return ints(b);
    }

    /**
     * rows rounded up to a power of two: a decode group's buffers, whose rows change from step to step, are sized so,
     * and grow a few times in all rather than whenever a step brings more rows.
     */
    private static int pow2(int rows) {
        return rows <= 1 ? 1 : Integer.highestOneBit(rows - 1) << 1;
    }

    private static float[] grow(float[] a, int n) {
        return a != null && a.length >= n ? a : new float[n];
    }

    private static int[] grow(int[] a, int n) {
        return a.length >= n ? a : new int[n];
    }
}
