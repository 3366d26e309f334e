package dev.scorch.engine.runtime;

import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import java.util.function.ToIntFunction;

/**
 * The activation buffers of forward passes, kept from one pass to the next so that a steady stream of batches
 * allocates nothing on the heap: each buffer is named by a {@link Key} its module declares, and grows to the
 * largest size asked of it. A buffer may be longer than asked, so code reads it with explicit sizes, never
 * {@code length}; its contents are whatever the last pass left unless asked for {@link #zeros}. A fresh
 * workspace hands out arrays of exactly the size asked. One pass at a time: not thread-safe.
 */
public final class Workspace {
    /** The name of one buffer; modules declare theirs as constants, one per buffer that is live at the same time. */
    public static final class Key {
        private final String name;

        public Key(String name) {
            this.name = name;
        }

        @Override
        public String toString() {
            return name;
        }
    }

    private final Map<Key, Object> buffers = new IdentityHashMap<>();

    /** A float buffer of at least n elements, contents undefined. */
    public float[] floats(Key key, int n) {
        return buffer(key, float[].class, n, false, float[]::new, f -> f.length);
    }

    /** A float buffer of at least n elements whose first n are 0. */
    public float[] zeros(Key key, int n) {
        float[] f = floats(key, n);
        Arrays.fill(f, 0, n, 0f);
        return f;
    }

    /** A float buffer of exactly n elements, contents undefined: for results handed to callers that read its length. */
    public float[] exactFloats(Key key, int n) {
        return buffer(key, float[].class, n, true, float[]::new, f -> f.length);
    }

    /** An int buffer of at least n elements, contents undefined. */
    public int[] ints(Key key, int n) {
        return buffer(key, int[].class, n, false, int[]::new, a -> a.length);
    }

    /**
     * An int buffer of exactly n elements, contents undefined: for arguments whose callee reads their length. One
     * is kept per length asked under key (a group of one and a group of five alternate without reallocating).
     */
    public int[] exactInts(Key key, int n) {
        return exact(key, n, int[]::new);
    }

    /**
     * An array of exactly n references, contents undefined: a group of modules, inputs or weights handed to a
     * callee that reads its length. One is kept per length asked under key.
     */
    public <T> T[] exactArray(Key key, int n, IntFunction<T[]> make) {
        return exact(key, n, make);
    }

    /** key's array of length n, made by make the first time that length is asked (a key names one array type). */
    @SuppressWarnings("unchecked")
    private <A> A exact(Key key, int n, IntFunction<A> make) {
        Object[] byLength = byLength(key, n);
        if (byLength[n] == null) {
            byLength[n] = make.apply(n);
        }
        return (A) byLength[n];
    }

    /** key's table of small exact-length buffers, index = length, grown to hold index n. */
    private Object[] byLength(Key key, int n) {
        Object[] t = buffers.get(key) instanceof ExactByLength e ? e.table : null;
        if (t == null || t.length <= n) {
            ExactByLength e =
                    new ExactByLength(t == null ? new Object[n + 1] : Arrays.copyOf(t, Math.max(n + 1, 2 * t.length)));
            buffers.put(key, e);
            t = e.table;
        }
        return t;
    }

    /** Exact-length buffers of one key, by length. */
    private record ExactByLength(Object[] table) {}

    /** The object kept under key, made once by make: a module's reusable per-pass state (a parallel task, a result holder). */
    public <T> T object(Key key, Supplier<T> make) {
        Object o = buffers.get(key);
        if (o == null) {
            o = make.get();
            buffers.put(key, o);
        }
        @SuppressWarnings("unchecked")
        T t = (T) o; // a key names one type (the caller's assignment checks it)
        return t;
    }

    /** An int buffer of at least n elements whose first n are 0. */
    public int[] intZeros(Key key, int n) {
        int[] a = ints(key, n);
        Arrays.fill(a, 0, n, 0);
        return a;
    }

    /** A double buffer of at least n elements, contents undefined. */
    public double[] doubles(Key key, int n) {
        return buffer(key, double[].class, n, false, double[]::new, d -> d.length);
    }

    /** key's buffer when it is of this type and long enough (exactly n long when exact), else a new one of n kept under key. */
    private <A> A buffer(Key key, Class<A> type, int n, boolean exact, IntFunction<A> make, ToIntFunction<A> length) {
        Object b = buffers.get(key);
        if (type.isInstance(b)) {
            A a = type.cast(b);
            int len = length.applyAsInt(a);
            if (exact ? len == n : len >= n) {
                return a;
            }
        }
        A a = make.apply(n);
        buffers.put(key, a);
        return a;
    }

    /**
     * count float buffers of at least n elements each (the inputs or outputs of a group of matmuls that run
     * together), contents undefined; the outer array may hold more than count.
     */
    public float[][] floatRows(Key key, int count, int n) {
        Object b = buffers.get(key);
        float[][] rows =
                b instanceof float[][] r ? (r.length >= count ? r : Arrays.copyOf(r, count)) : new float[count][];
        for (int i = 0; i < count; i++) {
            if (rows[i] == null || rows[i].length < n) {
                rows[i] = new float[n];
            }
        }
        buffers.put(key, rows);
        return rows;
    }

    /** Bytes held by every buffer: what keeping the workspace costs between passes. */
    public long bytes() {
        long sum = 0;
        for (Object b : buffers.values()) {
            if (b instanceof float[] f) {
                sum += 4L * f.length;
            } else if (b instanceof int[] a) {
                sum += 4L * a.length;
            } else if (b instanceof double[] d) {
                sum += 8L * d.length;
            } else if (b instanceof float[][] r) {
                for (float[] f : r) {
                    sum += f == null ? 0 : 4L * f.length;
                }
            }
        }
        return sum;
    }
}
