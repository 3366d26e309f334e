package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.KeyTiles;
import dev.scorch.engine.device.Mlp;
import dev.scorch.engine.device.PassRules;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.function.LongFunction;

/**
 * A forward pass on one device: its scratch {@link Arena}s (floats, ints), whose slices live until the layer or the
 * pass gives them back, the YaRN cos/sin table, and the batch as the block's parts see it, which {@link DecoderStage}
 * sets at the start of each pass. One pass uses it at a time: a GPU stage holds one (its device runs one pass at a
 * time), the CPU model one per workspace (each of the engine's concurrent passes has its own). It is kept from pass to
 * pass, with its arrays, so that a pass of a shape seen before allocates nothing.
 */
public final class Pass implements AutoCloseable {
    final Device dev;
    final Arena floats;
    final Arena ints;
    private final LongFunction<Buf> takeFloats;
    private final LongFunction<Buf> takeInts;
    private Buf cosSin; // [positions, qk_rope_head_dim]
    private int ropePositions;

    // This pass's, set by DecoderStage.
    PassRules rules; // its GEMMs' precision, which rows are decode rows, and its scratch ({@link #rules})
    PackedBatch packed;
    Rotary rotary; // each row's position and the cos/sin table ({@link #positions})
    // The prefill form's (sequences without cached tokens): each query's key range among the batch's own tokens, and
    // the query tiles ({@link #keys}); null in a decode step.
    KeyTiles keys;
    // The records of the pass before the last one of another shape: passes that alternate (a prompt's prefill between
    // decode steps) reuse both, so that a pass of a shape seen before allocates nothing.
    private PassRules rulesBefore;
    private Rotary rotaryBefore;
    private KeyTiles keysBefore;
    int[] past; // [sequences]: tokens each cache held before this pass; null without caches
    Cached cached; // the sequences with cached tokens (the absorbed form)
    DecodeInputs decode; // a decode step's device inputs ({@link DecoderStage#decodeStep}); null in other passes

    // Arrays kept from pass to pass: host staging grown to the largest pass, the absorbed form's per count.
    int[] hostKeyStart = new int[0];
    int[] hostKeyLen = new int[0];
    int[] hostTiles = new int[0];
    int[] hostPast = new int[0];
    int[] hostRows = new int[0]; // rows whose logits are asked for
    private long floatMark; // {@link #mark}'s
    private long intMark;
    final Workspace.ByLength<Cached> cachedByCount = new Workspace.ByLength<>(Cached::new);

    /** The sequences that attend over their caches in the absorbed form, each array [such sequences]. */
    static final class Cached {
        final int[] seq;
        final int[] rowStart; // first row in the batch
        final int[] rows;
        final int[] past; // tokens cached before this pass
        final Buf[] layers; // the current layer's cache of each

        Cached(int n) {
            seq = new int[n];
            rowStart = new int[n];
            rows = new int[n];
            past = new int[n];
            layers = new Buf[n];
        }
    }

    /**
     * A decode step's inputs in fixed device buffers, one token per row: each row's cache length (its token's position,
     * where its latent is appended) and an address table of each layer's caches.
     *
     * @param lengths [rows] I32
     * @param caches  [layers, stride] ADDR: row r's cache of layer l at l · stride + r, r &lt; rows &lt;= stride
     */
    record DecodeInputs(int rows, int stride, Buf lengths, Buf caches) {
        /** Layer l's caches [rows]. */
        Buf layer(int l) {
            return caches.slice((long) l * stride, rows);
        }
    }

    public Pass(Device dev) {
        this.dev = dev;
        floats = new Arena(dev, Buf.Kind.F32, 1 << 20);
        ints = new Arena(dev, Buf.Kind.I32, 1 << 16);
        takeFloats = floats::take;
        takeInts = ints::take;
        rules = new PassRules(GemmPrecision.FP32, DecodeRows.NONE, takeFloats, takeInts);
    }

    public Device device() {
        return dev;
    }

    /** Which rows of the last pass were decode rows. */
    public DecodeRows rows() {
        return rules.rows();
    }

    /** y[m, n] = x[m, k] · wᵀ, each row by the pass's row rule. */
    void gemm(Buf x, int m, int k, Buf w, int n, Buf y) {
        dev.gemm(x, m, k, w, n, y, rules.precision(), rules.rows());
    }

    /** SwiGLU MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), x [rows, hidden] → [rows, hidden]. */
    Buf mlp(Mlp m, Buf x, int rows) {
        Buf out = floats.take((long) rows * m.hidden());
        dev.mlp(m, x, rows, out, rules);
        return out;
    }

    /** Sets the pass's GEMM precision and decode rows (with its scratch) as its {@link #rules}. */
    void rules(GemmPrecision precision, DecodeRows rows) {
        if (rules.precision() != precision || rules.rows() != rows) {
            PassRules r = rulesBefore != null && rulesBefore.precision() == precision && rulesBefore.rows() == rows
                    ? rulesBefore
                    : new PassRules(precision, rows, takeFloats, takeInts);
            rulesBefore = rules;
            rules = r;
        }
    }

    /** cos/sin of positions [0, n) at least, grown by doubling (from 4,096) so a generation grows it a few times. */
    Buf cosSin(Rope rope, int n) {
        if (n > ropePositions) {
            int grown = Math.max(n, Math.max(4096, 2 * ropePositions));
            cosSin = dev.ropeTable(rope, grown, cosSin);
            ropePositions = grown;
        }
        return cosSin;
    }

    /** Sets the rows' positions [T] (with the cos/sin table as it is now) as the pass's {@link #rotary}. */
    void positions(Buf positions) {
        if (!Rotary.holds(rotary, positions, cosSin)) {
            Rotary r = Rotary.holds(rotaryBefore, positions, cosSin) ? rotaryBefore : new Rotary(positions, cosSin);
            rotaryBefore = rotary;
            rotary = r;
        }
    }

    /** Sets the pass's prefill-form queries ({@link KeyTiles}) as {@link #keys}. */
    void keys(int t, Buf keyStart, Buf keyLen, Buf tiles, int numTiles) {
        if (!KeyTiles.holds(keys, t, keyStart, keyLen, tiles, numTiles)) {
            KeyTiles k = KeyTiles.holds(keysBefore, t, keyStart, keyLen, tiles, numTiles)
                    ? keysBefore
                    : new KeyTiles(t, keyStart, keyLen, tiles, numTiles);
            keysBefore = keys;
            keys = k;
        }
    }

    /** Marks where the scratch stands: {@link #release} gives back what is taken after it (a logits chunk once read). */
    public void mark() {
        floatMark = floats.mark();
        intMark = ints.mark();
    }

    /** Gives back the scratch taken since the last {@link #mark}. */
    public void release() {
        floats.release(floatMark);
        ints.release(intMark);
    }

    static int[] grow(int[] a, int n) {
        return a.length >= n ? a : new int[n];
    }

    /** Allocations the arenas have made (slices taken before may have moved since when it changes). */
    long allocations() {
        return floats.allocations() + ints.allocations();
    }

    /** Bytes of the arenas now. */
    public long bytes() {
        return floats.bytes() + ints.bytes();
    }

    @Override
    public void close() {
        if (cosSin != null) {
            dev.free(cosSin);
            cosSin = null;
            ropePositions = 0;
        }
        floats.close();
        ints.close();
    }
}
