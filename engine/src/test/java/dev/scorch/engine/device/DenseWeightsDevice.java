package dev.scorch.engine.device;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.model.RouterShape;

/**
 * {@link HostDevice} with every linear weight decoded whole into the precision's dtype ({@link Device#denseWeight}):
 * INT4 weights dequantised on the host and uploaded as plain weights, which a packed INT4 model is compared with.
 */
final class DenseWeightsDevice implements Device {
    private final HostDevice dev = new HostDevice();

    @Override
    public Buf weight(GemmPrecision precision, Linear... stacked) {
        return dev.denseWeight(precision, stacked);
    }

    @Override
    public String describe() {
        return dev.describe();
    }

    @Override
    public long totalBytes() {
        return dev.totalBytes();
    }

    @Override
    public long freeBytes() {
        return dev.freeBytes();
    }

    @Override
    public Buf alloc(Buf.Kind kind, long n) {
        return dev.alloc(kind, n);
    }

    @Override
    public void free(Buf b) {
        dev.free(b);
    }

    @Override
    public void zero(Buf b) {
        dev.zero(b);
    }

    @Override
    public void write(Buf dst, float[] src, int off, int n) {
        dev.write(dst, src, off, n);
    }

    @Override
    public void write(Buf dst, int[] src, int off, int n) {
        dev.write(dst, src, off, n);
    }

    @Override
    public void read(Buf src, float[] dst, int off, int n) {
        dev.read(src, dst, off, n);
    }

    @Override
    public void read(Buf src, int[] dst, int off, int n) {
        dev.read(src, dst, off, n);
    }

    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        return dev.denseWeight(precision, stacked);
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        return dev.weight(w, precision);
    }

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        dev.gemm(x, m, k, w, n, y, precision);
    }

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out) {
        dev.rmsNorm(x, rows, stride, offset, dim, weight, eps, out);
    }

    @Override
    public void rope(
            Buf x,
            int rows,
            int heads,
            int rowStride,
            int headStride,
            int offset,
            int ropeDim,
            Buf positions,
            Buf cosSin) {
        dev.rope(x, rows, heads, rowStride, headStride, offset, ropeDim, positions, cosSin);
    }

    @Override
    public void rmsNormRope(
            Buf x,
            int rows,
            int stride,
            int offset,
            int rank,
            Buf weight,
            double eps,
            int ropeDim,
            Buf positions,
            Buf cosSin,
            Buf latent,
            Buf kPe) {
        dev.rmsNormRope(x, rows, stride, offset, rank, weight, eps, ropeDim, positions, cosSin, latent, kPe);
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        dev.copyCols(src, rows, srcStride, srcOff, width, dst, dstStride, dstOff);
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        dev.add(x, y, n);
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        dev.swiglu(gu, rows, inter, out);
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        dev.gatherRows(x, rows, n, width, out);
    }

    @Override
    public void mlaAttention(
            Buf q,
            Buf kv,
            Buf kPe,
            Buf keyStart,
            Buf keyLen,
            Buf tiles,
            int numTiles,
            int t,
            int heads,
            int qkNope,
            int qkRope,
            int vHead,
            float scale,
            Buf out) {
        dev.mlaAttention(q, kv, kPe, keyStart, keyLen, tiles, numTiles, t, heads, qkNope, qkRope, vHead, scale, out);
    }

    @Override
    public void mlaDecode(
            Buf q,
            int rows,
            Buf cache,
            int past,
            Buf kvBProj,
            int heads,
            int qkNope,
            int qkRope,
            int vHead,
            int kvLoraRank,
            float scale,
            Buf out) {
        dev.mlaDecode(q, rows, cache, past, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out);
    }

    @Override
    public void writeAddresses(Buf dst, Buf[] src) {
        dev.writeAddresses(dst, src);
    }

    @Override
    public void cacheAppend(Buf latent, Buf kPe, int rows, int kvLoraRank, int qkRope, Buf caches, Buf lengths) {
        dev.cacheAppend(latent, kPe, rows, kvLoraRank, qkRope, caches, lengths);
    }

    @Override
    public void mlaDecodeRows(
            Buf q,
            int rows,
            Buf caches,
            Buf lengths,
            Buf kvBProj,
            int heads,
            int qkNope,
            int qkRope,
            int vHead,
            int kvLoraRank,
            float scale,
            Buf out) {
        dev.mlaDecodeRows(q, rows, caches, lengths, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out);
    }

    @Override
    public void gemmGrouped(
            Buf x, int[] rowStart, int[] rows, int groups, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        dev.gemmGrouped(x, rowStart, rows, groups, k, w, n, y, precision);
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        dev.moePermute(experts, t, topK, nExperts, offsets, slotOf, slotRow);
    }

    @Override
    public void gemmExperts(Buf x, Buf offsets, int slots, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        dev.gemmExperts(x, offsets, slots, k, w, n, y, precision);
    }

    @Override
    public void gemmExpertsSwiglu(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int inter, Buf out, GemmPrecision precision) {
        dev.gemmExpertsSwiglu(x, offsets, slots, k, w, inter, out, precision);
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        dev.moeCombine(ye, slot, weights, tokens, topK, width, addend, y);
    }

    @Override
    public void moeRoute(Buf logits, Buf bias, int t, RouterShape r, Buf experts, Buf weights) {
        dev.moeRoute(logits, bias, t, r, experts, weights);
    }

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        dev.logSoftmaxStats(logits, rows, vocab, targets, stats);
    }

    @Override
    public void synchronize() {
        dev.synchronize();
    }

    @Override
    public void close() {
        dev.close();
    }
}
