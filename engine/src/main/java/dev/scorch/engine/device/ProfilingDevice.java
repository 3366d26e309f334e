package dev.scorch.engine.device;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.model.RouterShape;
import java.util.Map;
import java.util.TreeMap;

/**
 * A {@link Device} that waits for each call to finish and adds its wall time (the host's launch cost plus the
 * device's run time) to a per-operation total: where a forward pass spends its time, at the price of one
 * synchronisation per call. For the device check, not for production runs.
 */
public final class ProfilingDevice implements Device {
    /** Calls and nanoseconds of one operation. */
    public static final class Stat {
        public long calls;
        public long nanos;
    }

    private final Device dev;
    private final Map<String, Stat> stats = new TreeMap<>();

    public ProfilingDevice(Device dev) {
        this.dev = dev;
    }

    public Map<String, Stat> stats() {
        return stats;
    }

    public void reset() {
        stats.clear();
    }

    private void time(String op, Runnable r) {
        long t0 = System.nanoTime();
        r.run();
        dev.synchronize();
        Stat s = stats.computeIfAbsent(op, k -> new Stat());
        s.calls++;
        s.nanos += System.nanoTime() - t0;
    }

    @Override
    public String describe() {
        return "profiled " + dev.describe();
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
        Buf[] b = new Buf[1];
        time("alloc", () -> b[0] = dev.alloc(kind, n));
        return b[0];
    }

    @Override
    public void free(Buf b) {
        time("free", () -> dev.free(b));
    }

    @Override
    public void zero(Buf b) {
        time("zero", () -> dev.zero(b));
    }

    @Override
    public void write(Buf dst, float[] src, int off, int n) {
        time("write", () -> dev.write(dst, src, off, n));
    }

    @Override
    public void write(Buf dst, int[] src, int off, int n) {
        time("writeInts", () -> dev.write(dst, src, off, n));
    }

    @Override
    public void read(Buf src, float[] dst, int off, int n) {
        time("read", () -> dev.read(src, dst, off, n));
    }

    @Override
    public void read(Buf src, int[] dst, int off, int n) {
        time("readInts", () -> dev.read(src, dst, off, n));
    }

    @Override
    public boolean copyTo(Buf src, Device to, Buf dst, long n) {
        boolean[] copied = new boolean[1];
        time("copyTo", () -> copied[0] = dev.copyTo(src, to instanceof ProfilingDevice p ? p.dev : to, dst, n));
        return copied[0];
    }

    @Override
    public Buf weight(GemmPrecision precision, Linear... stacked) {
        return dev.weight(precision, stacked);
    }

    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        return dev.denseWeight(precision, stacked);
    }

    @Override
    public Buf int4Weight(int[] packed, float[] scales, int rows, int cols, int groupSize) {
        return dev.int4Weight(packed, scales, rows, cols, groupSize);
    }

    @Override
    public Buf fp8Weight(int[] codes, float[] scales, int[] scaleRows, int rows, int cols, int blockCols) {
        return dev.fp8Weight(codes, scales, scaleRows, rows, cols, blockCols);
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        return dev.weight(w, precision);
    }

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        time("gemm", () -> dev.gemm(x, m, k, w, n, y, precision));
    }

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out) {
        time("rmsNorm", () -> dev.rmsNorm(x, rows, stride, offset, dim, weight, eps, out));
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
        time("rope", () -> dev.rope(x, rows, heads, rowStride, headStride, offset, ropeDim, positions, cosSin));
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
        time(
                "rmsNormRope",
                () -> dev.rmsNormRope(
                        x, rows, stride, offset, rank, weight, eps, ropeDim, positions, cosSin, latent, kPe));
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        time("copyCols", () -> dev.copyCols(src, rows, srcStride, srcOff, width, dst, dstStride, dstOff));
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        time("add", () -> dev.add(x, y, n));
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        time("swiglu", () -> dev.swiglu(gu, rows, inter, out));
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        time("gatherRows", () -> dev.gatherRows(x, rows, n, width, out));
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
        time(
                "mlaAttention",
                () -> dev.mlaAttention(
                        q, kv, kPe, keyStart, keyLen, tiles, numTiles, t, heads, qkNope, qkRope, vHead, scale, out));
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
        time(
                "mlaDecode",
                () -> dev.mlaDecode(
                        q, rows, cache, past, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out));
    }

    @Override
    public void writeAddresses(Buf dst, Buf[] src) {
        time("writeAddresses", () -> dev.writeAddresses(dst, src));
    }

    @Override
    public void cacheAppend(Buf latent, Buf kPe, int rows, int kvLoraRank, int qkRope, Buf caches, Buf lengths) {
        time("cacheAppend", () -> dev.cacheAppend(latent, kPe, rows, kvLoraRank, qkRope, caches, lengths));
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
        time(
                "mlaDecodeRows",
                () -> dev.mlaDecodeRows(
                        q, rows, caches, lengths, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out));
    }

    @Override
    public void gemmGrouped(
            Buf x, int[] rowStart, int[] rows, int groups, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        time("gemmGrouped", () -> dev.gemmGrouped(x, rowStart, rows, groups, k, w, n, y, precision));
    }

    @Override
    public boolean batchesGroups() {
        return dev.batchesGroups();
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        time("moePermute", () -> dev.moePermute(experts, t, topK, nExperts, offsets, slotOf, slotRow));
    }

    @Override
    public void gemmExperts(Buf x, Buf offsets, int slots, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        time("gemmExperts", () -> dev.gemmExperts(x, offsets, slots, k, w, n, y, precision));
    }

    @Override
    public void gemmExpertsSwiglu(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int inter, Buf out, GemmPrecision precision) {
        time("gemmExpertsSwiglu", () -> dev.gemmExpertsSwiglu(x, offsets, slots, k, w, inter, out, precision));
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        time("moeCombine", () -> dev.moeCombine(ye, slot, weights, tokens, topK, width, addend, y));
    }

    @Override
    public void moeRoute(Buf logits, Buf bias, int t, RouterShape r, Buf experts, Buf weights) {
        time("moeRoute", () -> dev.moeRoute(logits, bias, t, r, experts, weights));
    }

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        time("logSoftmaxStats", () -> dev.logSoftmaxStats(logits, rows, vocab, targets, stats));
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
