package dev.scorch.engine.device.host;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.MoeShape;
import java.util.Arrays;

/**
 * The memory of a {@link Device} whose buffers are Java heap arrays ({@code CpuDevice}, {@link HostDevice}): F32 and
 * I32 buffers are float[] and int[], read and written by copies, and counted as they are allocated and freed.
 */
public abstract class HeapDevice implements Device {
    protected long allocated; // bytes of the buffers alloc made and free has not given back

    @Override
    public Buf alloc(Buf.Kind kind, long n) {
        if (kind != Buf.Kind.F32 && kind != Buf.Kind.I32 && kind != Buf.Kind.BF16 && kind != Buf.Kind.ADDR) {
            throw new IllegalArgumentException(kind + " weights come from their own upload, not alloc");
        }
        int len = Math.toIntExact(n);
        allocated += n * kind.bytes();
        Object storage = switch (kind) {
            case I32 -> new int[len];
            case ADDR -> new Buf[len]; // an address is the buffer itself
            default -> new float[len];
        };
        return new Buf(storage, kind, 0, n);
    }

    @Override
    public void free(Buf b) {
        allocated -= b.bytes();
    }

    /** src's own array where it starts at index 0, else a copy in into. */
    @Override
    public float[] hostFloats(Buf src, int n, float[] into) {
        if (off(src) == 0 && src.storage() instanceof float[] f) {
            return f;
        }
        return Device.super.hostFloats(src, n, into);
    }

    @Override
    public void zero(Buf b) {
        if (b.kind() == Buf.Kind.I32) {
            Arrays.fill(ints(b), off(b), off(b) + len(b), 0);
        } else {
            Arrays.fill(floats(b), off(b), off(b) + len(b), 0f);
        }
    }

    @Override
    public void write(Buf dst, float[] src, int off, int n) {
        System.arraycopy(src, off, floats(dst.need(Buf.Kind.F32, n, "write")), off(dst), n);
    }

    @Override
    public void write(Buf dst, int[] src, int off, int n) {
        System.arraycopy(src, off, ints(dst.need(Buf.Kind.I32, n, "write")), off(dst), n);
    }

    @Override
    public void read(Buf src, float[] dst, int off, int n) {
        System.arraycopy(floats(src.need(Buf.Kind.F32, n, "read")), off(src), dst, off, n);
    }

    @Override
    public void read(Buf src, int[] dst, int off, int n) {
        System.arraycopy(ints(src.need(Buf.Kind.I32, n, "read")), off(src), dst, off, n);
    }

    /** Another heap device's buffers are arrays too: a plain copy. */
    @Override
    public boolean copyTo(Buf src, Device to, Buf dst, long n) {
        if (!(to instanceof HeapDevice)) {
            return false;
        }
        System.arraycopy(
                floats(src.need(Buf.Kind.F32, n, "copyTo")),
                off(src),
                floats(dst.need(Buf.Kind.F32, n, "copyTo")),
                off(dst),
                Math.toIntExact(n));
        return true;
    }

    @Override
    public void writeAddresses(Buf dst, Buf[] src) {
        System.arraycopy(
                src, 0, addresses(dst.need(Buf.Kind.ADDR, src.length, "writeAddresses")), off(dst), src.length);
    }

    @Override
    public void cacheAppend(Buf latent, Buf kPe, int rows, MlaShape s, Buf caches, Buf lengths) {
        int kvLoraRank = s.kvLoraRank();
        int qkRope = s.qkRope();
        int width = s.kvAWidth();
        for (int r = 0; r < rows; r++) {
            Buf cache = cache(caches, r);
            int at = ints(lengths)[off(lengths) + r];
            cache.need(Buf.Kind.F32, (long) (at + 1) * width, "cacheAppend cache of row " + r);
            copyCols(
                    latent.slice((long) r * kvLoraRank, kvLoraRank),
                    1,
                    kvLoraRank,
                    0,
                    kvLoraRank,
                    cache,
                    width,
                    at * width);
            copyCols(kPe.slice((long) r * qkRope, qkRope), 1, qkRope, 0, qkRope, cache, width, at * width + kvLoraRank);
        }
    }

    /** Each row as {@link #mlaDecode} of one token over its cache, its length read from lengths. */
    @Override
    public void mlaDecodeRows(Buf q, int rows, Buf caches, Buf lengths, Buf kvBProj, MlaShape s, Buf out) {
        int qRow = s.heads() * s.qHead();
        int outRow = s.heads() * s.vHead();
        for (int r = 0; r < rows; r++) {
            mlaDecode(
                    q.slice((long) r * qRow, qRow),
                    1,
                    cache(caches, r),
                    ints(lengths)[off(lengths) + r],
                    kvBProj,
                    s,
                    out.slice((long) r * outRow, outRow));
        }
    }

    /** Row r's buffer of an address table. */
    protected static Buf cache(Buf caches, int r) {
        Buf b = addresses(caches)[off(caches) + r];
        if (b == null) {
            throw new IllegalArgumentException("address table entry " + r + " was never written");
        }
        return b;
    }

    /** The router's scratch for one call: a device that keeps one from call to call returns it. */
    protected abstract NoauxTcRouter.Scratch routerScratch();

    @Override
    public void moeRoute(Buf logits, Buf bias, int t, MoeShape r, Buf experts, Buf weights) {
        NoauxTcRouter.route(
                floats(logits),
                off(logits),
                floats(bias),
                off(bias),
                t,
                r,
                ints(experts),
                off(experts),
                floats(weights),
                off(weights),
                routerScratch());
    }

    protected static Buf[] addresses(Buf b) {
        if (!(b.storage() instanceof Buf[] a)) {
            throw new IllegalArgumentException("not an address buffer of a heap device");
        }
        return a;
    }

    protected static float[] floats(Buf b) {
        if (!(b.storage() instanceof float[] a)) {
            throw new IllegalArgumentException("not a float buffer of a heap device");
        }
        return a;
    }

    protected static int[] ints(Buf b) {
        if (!(b.storage() instanceof int[] a)) {
            throw new IllegalArgumentException("not an int buffer of a heap device");
        }
        return a;
    }

    protected static int off(Buf b) {
        return (int) b.offset();
    }

    protected static int len(Buf b) {
        return (int) b.length();
    }
}
