package dev.scorch.engine.gpu;

/**
 * What a block part needs while a forward pass runs: the device, the GEMM precision, the pass's scratch arenas
 * (floats, ints), whose slices live until the layer or the pass gives them back, and which rows are decode rows.
 */
record Pass(Device dev, GemmPrecision precision, Arena floats, Arena ints, DecodeRows rows) {
    Pass(Device dev, GemmPrecision precision, Arena floats, Arena ints) {
        this(dev, precision, floats, ints, DecodeRows.NONE);
    }

    /** y[m, n] = x[m, k] · wᵀ, each row by the pass's row rule. */
    void gemm(Buf x, int m, int k, Buf w, int n, Buf y) {
        dev.gemm(x, m, k, w, n, y, precision, rows);
    }
}
