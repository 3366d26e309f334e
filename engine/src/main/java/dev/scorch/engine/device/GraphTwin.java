package dev.scorch.engine.device;

import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.model.RouterShape;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * The twin of CUDA graph capture over any {@link Device} (a {@link HostDevice} in the tests): while capturing, each
 * kernel call is recorded with its arguments as given, not run (buffers are device memory, read when the graph runs;
 * host numbers are baked, as a CUDA graph bakes kernel parameters), and host reads, writes, allocations, frees and
 * synchronisation are refused; a launch replays the recorded calls. Checking, a launch also records the step again
 * and fails when any call or argument differs from the captured one: a host value that changes between steps
 * reached a kernel, and a real graph would run it with the stale value. A launch fails too when a buffer the graph
 * uses has been freed since (a CUDA graph would read freed memory).
 */
public final class GraphTwin implements Device {
    private final Device dev;
    private final boolean checking;
    private List<Call> recording; // while capturing
    private final Set<Object> freed = Collections.newSetFromMap(new IdentityHashMap<>()); // storages given back
    private int captures;
    private int launches;

    /** One recorded kernel call: its name, its arguments as given, and the call itself. */
    private record Call(String op, Object[] args, Runnable run) {}

    /** A checking twin over dev. */
    public GraphTwin(Device dev) {
        this(dev, true);
    }

    /** checking false: launches replay without recording the step again (what a CUDA graph does). */
    public GraphTwin(Device dev, boolean checking) {
        this.dev = dev;
        this.checking = checking;
    }

    /** Runs a kernel call, or records it while capturing. */
    private void call(String op, Runnable run, Object... args) {
        if (recording == null) {
            run.run();
        } else {
            recording.add(new Call(op, args, run));
        }
    }

    /** Refuses a host operation while capturing. */
    private void host(String op) {
        if (recording != null) {
            throw new IllegalStateException(op + " while capturing a device graph: a captured step makes no host reads,"
                    + " writes, allocations or synchronisation (write its inputs before the launch, read its outputs"
                    + " after)");
        }
    }

    private List<Call> record(Runnable step) {
        if (recording != null) {
            throw new IllegalStateException("a device graph is already being captured");
        }
        recording = new ArrayList<>();
        try {
            step.run();
            return recording;
        } finally {
            recording = null;
        }
    }

    /** Graphs captured so far. */
    public int captures() {
        return captures;
    }

    /** Graph launches so far. */
    public int launches() {
        return launches;
    }

    @Override
    public DeviceGraph capture(Runnable step) {
        List<Call> calls = record(step);
        captures++;
        return new DeviceGraph() {
            private boolean closed;

            @Override
            public void launch() {
                if (closed) {
                    throw new IllegalStateException("launch of a closed device graph");
                }
                if (checking) {
                    compare(calls, record(step));
                }
                for (Call c : calls) {
                    checkLive(c);
                    c.run().run();
                }
                launches++;
            }

            @Override
            public void close() {
                closed = true;
            }
        };
    }

    /** Fails at the first call or argument of now that differs from the captured one. */
    private static void compare(List<Call> captured, List<Call> now) {
        for (int i = 0; i < Math.min(captured.size(), now.size()); i++) {
            Call a = captured.get(i);
            Call b = now.get(i);
            if (!a.op().equals(b.op()) || a.args().length != b.args().length) {
                throw stale("call " + i + " was " + a.op() + " at capture, is " + b.op() + " now");
            }
            for (int j = 0; j < a.args().length; j++) {
                if (!same(a.args()[j], b.args()[j])) {
                    throw stale("call " + i + " (" + a.op() + ") argument " + j + " was " + show(a.args()[j])
                            + " at capture, is " + show(b.args()[j]) + " now");
                }
            }
        }
        if (captured.size() != now.size()) {
            throw stale("the step made " + captured.size() + " calls at capture, " + now.size() + " now");
        }
    }

    private static IllegalStateException stale(String what) {
        return new IllegalStateException("stale device graph: " + what + " (a host value that changes between steps"
                + " reached a captured call; it belongs in a device buffer written before each launch)");
    }

    /** Buffers by what they address; arrays by their elements; the rest by value. */
    private static boolean same(Object a, Object b) {
        if (a instanceof Buf x && b instanceof Buf y) {
            return x.storage() == y.storage()
                    && x.kind() == y.kind()
                    && x.offset() == y.offset()
                    && x.length() == y.length();
        }
        if (a instanceof Object[] x && b instanceof Object[] y) {
            if (x.length != y.length) {
                return false;
            }
            for (int i = 0; i < x.length; i++) {
                if (!same(x[i], y[i])) {
                    return false;
                }
            }
            return true;
        }
        return Objects.equals(a, b);
    }

    private static String show(Object a) {
        return a instanceof Buf b
                ? b.kind() + " buffer [" + b.offset() + ", +" + b.length() + ")"
                : a instanceof Object[] x ? Arrays.toString(x) : String.valueOf(a);
    }

    /** Fails when a buffer call c uses (or one an address table it reads points at) was freed after capture. */
    private void checkLive(Call c) {
        for (Object a : c.args()) {
            for (Object o : a instanceof Object[] x ? x : new Object[] {a}) {
                if (o instanceof Buf b) {
                    boolean gone = freed.contains(b.storage());
                    if (b.storage() instanceof Buf[] table) {
                        for (long i = b.offset(); i < b.offset() + b.length() && !gone; i++) {
                            gone = table[(int) i] != null && freed.contains(table[(int) i].storage());
                        }
                    }
                    if (gone) {
                        throw new IllegalStateException(
                                "device graph call " + c.op() + " uses a buffer freed after" + " capture: " + show(b));
                    }
                }
            }
        }
    }

    // --- Host operations: refused while capturing

    @Override
    public String describe() {
        return "graph twin over " + dev.describe();
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
        host("alloc");
        return dev.alloc(kind, n);
    }

    @Override
    public void free(Buf b) {
        host("free");
        freed.add(b.storage());
        dev.free(b);
    }

    @Override
    public void zero(Buf b) {
        host("zero");
        dev.zero(b);
    }

    @Override
    public void write(Buf dst, float[] src, int off, int n) {
        host("write");
        dev.write(dst, src, off, n);
    }

    @Override
    public void write(Buf dst, int[] src, int off, int n) {
        host("write");
        dev.write(dst, src, off, n);
    }

    @Override
    public void read(Buf src, float[] dst, int off, int n) {
        host("read");
        dev.read(src, dst, off, n);
    }

    @Override
    public void read(Buf src, int[] dst, int off, int n) {
        host("read");
        dev.read(src, dst, off, n);
    }

    @Override
    public void writeAddresses(Buf dst, Buf[] src) {
        host("writeAddresses");
        dev.writeAddresses(dst, src);
    }

    @Override
    public Buf weight(GemmPrecision precision, Linear... stacked) {
        host("weight upload");
        return dev.weight(precision, stacked);
    }

    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        host("weight upload");
        return dev.denseWeight(precision, stacked);
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        host("weight upload");
        return dev.weight(w, precision);
    }

    @Override
    public boolean slicesScratch() {
        return dev.slicesScratch();
    }

    @Override
    public boolean batchesGroups() {
        return dev.batchesGroups();
    }

    @Override
    public void synchronize() {
        host("synchronize");
        dev.synchronize();
    }

    @Override
    public void close() {
        host("close");
        dev.close();
    }

    // --- Kernels: recorded while capturing

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        call("gemm", () -> dev.gemm(x, m, k, w, n, y, precision), x, m, k, w, n, y, precision);
    }

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision, DecodeRows rows) {
        call("gemm", () -> dev.gemm(x, m, k, w, n, y, precision, rows), x, m, k, w, n, y, precision, rows);
    }

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out) {
        call(
                "rmsNorm",
                () -> dev.rmsNorm(x, rows, stride, offset, dim, weight, eps, out),
                x,
                rows,
                stride,
                offset,
                dim,
                weight,
                eps,
                out);
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
        call(
                "rope",
                () -> dev.rope(x, rows, heads, rowStride, headStride, offset, ropeDim, positions, cosSin),
                x,
                rows,
                heads,
                rowStride,
                headStride,
                offset,
                ropeDim,
                positions,
                cosSin);
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
        call(
                "rmsNormRope",
                () -> dev.rmsNormRope(
                        x, rows, stride, offset, rank, weight, eps, ropeDim, positions, cosSin, latent, kPe),
                x,
                rows,
                stride,
                offset,
                rank,
                weight,
                eps,
                ropeDim,
                positions,
                cosSin,
                latent,
                kPe);
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        call(
                "copyCols",
                () -> dev.copyCols(src, rows, srcStride, srcOff, width, dst, dstStride, dstOff),
                src,
                rows,
                srcStride,
                srcOff,
                width,
                dst,
                dstStride,
                dstOff);
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        call("add", () -> dev.add(x, y, n), x, y, n);
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        call("swiglu", () -> dev.swiglu(gu, rows, inter, out), gu, rows, inter, out);
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        call("gatherRows", () -> dev.gatherRows(x, rows, n, width, out), x, rows, n, width, out);
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
        call(
                "mlaAttention",
                () -> dev.mlaAttention(
                        q, kv, kPe, keyStart, keyLen, tiles, numTiles, t, heads, qkNope, qkRope, vHead, scale, out),
                q,
                kv,
                kPe,
                keyStart,
                keyLen,
                tiles,
                numTiles,
                t,
                heads,
                qkNope,
                qkRope,
                vHead,
                scale,
                out);
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
        call(
                "mlaDecode",
                () -> dev.mlaDecode(
                        q, rows, cache, past, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out),
                q,
                rows,
                cache,
                past,
                kvBProj,
                heads,
                qkNope,
                qkRope,
                vHead,
                kvLoraRank,
                scale,
                out);
    }

    @Override
    public void cacheAppend(Buf latent, Buf kPe, int rows, int kvLoraRank, int qkRope, Buf caches, Buf lengths) {
        call(
                "cacheAppend",
                () -> dev.cacheAppend(latent, kPe, rows, kvLoraRank, qkRope, caches, lengths),
                latent,
                kPe,
                rows,
                kvLoraRank,
                qkRope,
                caches,
                lengths);
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
        call(
                "mlaDecodeRows",
                () -> dev.mlaDecodeRows(
                        q, rows, caches, lengths, kvBProj, heads, qkNope, qkRope, vHead, kvLoraRank, scale, out),
                q,
                rows,
                caches,
                lengths,
                kvBProj,
                heads,
                qkNope,
                qkRope,
                vHead,
                kvLoraRank,
                scale,
                out);
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        call(
                "moePermute",
                () -> dev.moePermute(experts, t, topK, nExperts, offsets, slotOf, slotRow),
                experts,
                t,
                topK,
                nExperts,
                offsets,
                slotOf,
                slotRow);
    }

    /** One kernel over the device's group bounds (CUDA: moe_gemm; its per-expert default reads them back instead). */
    @Override
    public void gemmExperts(Buf x, Buf offsets, int slots, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        call(
                "gemmExperts",
                () -> dev.gemmExperts(x, offsets, slots, k, w, n, y, precision),
                x,
                offsets,
                slots,
                k,
                w,
                n,
                y,
                precision);
    }

    @Override
    public void gemmExpertsSwiglu(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int inter, Buf out, GemmPrecision precision) {
        call(
                "gemmExpertsSwiglu",
                () -> dev.gemmExpertsSwiglu(x, offsets, slots, k, w, inter, out, precision),
                x,
                offsets,
                slots,
                k,
                w,
                inter,
                out,
                precision);
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        call(
                "moeCombine",
                () -> dev.moeCombine(ye, slot, weights, tokens, topK, width, addend, y),
                ye,
                slot,
                weights,
                tokens,
                topK,
                width,
                addend,
                y);
    }

    @Override
    public void moeRoute(Buf logits, Buf bias, int t, RouterShape r, Buf experts, Buf weights) {
        call(
                "moeRoute",
                () -> dev.moeRoute(logits, bias, t, r, experts, weights),
                logits,
                bias,
                t,
                r,
                experts,
                weights);
    }

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        call(
                "logSoftmaxStats",
                () -> dev.logSoftmaxStats(logits, rows, vocab, targets, stats),
                logits,
                rows,
                vocab,
                targets,
                stats);
    }
}
