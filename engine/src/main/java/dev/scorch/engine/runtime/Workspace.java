package dev.scorch.engine.runtime;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.IntFunction;

/**
 * The scratch of forward passes, kept from one pass to the next so that a steady stream of batches allocates nothing
 * on the heap. Each user (the model, the scorer, a packed batch) keeps its buffers in a scratch object of its own
 * type, a {@link Buffers}, held here under the user's {@link Slot} and made on the workspace's first use of it. A
 * buffer grows to the largest size asked of it and may be longer than asked, so code reads it with explicit sizes,
 * never {@code length}; its contents are whatever the last pass left unless asked for zeros. A fresh workspace
 * hands out arrays of exactly the size asked. One pass at a time: not thread-safe (one workspace per caller).
 */
public final class Workspace {
    /** One user's scratch type: a constant per user, whose scratch each workspace makes on first use. */
    public static final class Slot<T extends Buffers> {
        private static final AtomicInteger COUNT = new AtomicInteger();
        private final int index = COUNT.getAndIncrement();
        private final Function<Workspace, T> make;

        public Slot(Function<Workspace, T> make) {
            this.make = make;
        }
    }

    private Object[] scratch = new Object[0]; // by slot index
    private long bytes; // held by every buffer of every scratch

    /** slot's scratch in this workspace, made the first time it is asked. */
    public <T extends Buffers> T get(Slot<T> slot) {
        if (slot.index >= scratch.length) {
            scratch = Arrays.copyOf(scratch, slot.index + 1);
        }
        @SuppressWarnings("unchecked")
        T t = (T) scratch[slot.index]; // the slot made it
        if (t == null) {
            t = slot.make.apply(this);
            scratch[slot.index] = t;
        }
        return t;
    }

    /** Bytes held by every buffer: what keeping the workspace costs between passes. */
    public long bytes() {
        long b = bytes;
        for (Object o : scratch) {
            b += o == null ? 0 : ((Buffers) o).otherBytes();
        }
        return b;
    }

    /**
     * The base of a scratch type: its fields are the buffers, each grown by these methods (the workspace's growth
     * policy: kept when large enough, else replaced) and counted in the workspace's {@link #bytes}, as in
     * {@code float[] q = s.q = s.floats(s.q, t * width);}.
     */
    public abstract static class Buffers {
        private final Workspace ws;

        protected Buffers(Workspace ws) {
            this.ws = ws;
        }

        /** kept when it holds at least n floats, else a new buffer of n: contents undefined. */
        public final float[] floats(float[] kept, int n) {
            return kept != null && kept.length >= n ? kept : new float[held(kept == null ? 0 : kept.length, n, 4)];
        }

        /** kept when it holds exactly n floats, else a new one: for results handed to callers that read its length. */
        public final float[] exactFloats(float[] kept, int n) {
            return kept != null && kept.length == n ? kept : new float[held(kept == null ? 0 : kept.length, n, 4)];
        }

        /** kept when it holds at least n ints, else a new buffer of n: contents undefined. */
        public final int[] ints(int[] kept, int n) {
            return kept != null && kept.length >= n ? kept : new int[held(kept == null ? 0 : kept.length, n, 4)];
        }

        /** kept when it holds at least n doubles, else a new buffer of n: contents undefined. */
        public final double[] doubles(double[] kept, int n) {
            return kept != null && kept.length >= n ? kept : new double[held(kept == null ? 0 : kept.length, n, 8)];
        }

        /** Bytes this scratch holds beyond the buffers grown here (a device's scratch arenas): counted in bytes(). */
        protected long otherBytes() {
            return 0;
        }

        /** Counts a buffer of oldLength replaced by one of newLength; returns newLength. */
        private int held(int oldLength, int newLength, int elementBytes) {
            ws.bytes += (long) elementBytes * (newLength - oldLength);
            return newLength;
        }
    }

    /**
     * Arrays of exactly the length asked, contents undefined: arguments whose callee reads their length (a group of
     * modules, inputs or weights). One is kept per length asked, so a group of one and a group of five alternate
     * without reallocating.
     */
    public static final class ByLength<A> {
        private final IntFunction<A> make;
        private Object[] byLength = new Object[0]; // index = length

        public ByLength(IntFunction<A> make) {
            this.make = make;
        }

        public A get(int n) {
            if (n >= byLength.length) {
                byLength = Arrays.copyOf(byLength, Math.max(n + 1, 2 * byLength.length));
            }
            if (byLength[n] == null) {
                byLength[n] = make.apply(n);
            }
            @SuppressWarnings("unchecked")
            A a = (A) byLength[n]; // make made it
            return a;
        }
    }
}
