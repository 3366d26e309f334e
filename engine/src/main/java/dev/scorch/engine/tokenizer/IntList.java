package dev.scorch.engine.tokenizer;

import java.util.Arrays;

/** A growable int array. */
final class IntList {
    private int[] a;
    private int n;

    IntList(int capacity) {
        a = new int[Math.max(4, capacity)];
    }

    void add(int v) {
        if (n == a.length) {
            a = Arrays.copyOf(a, n * 2);
        }
        a[n++] = v;
    }

    void addAll(int[] vs) {
        if (n + vs.length > a.length) {
            a = Arrays.copyOf(a, Math.max(a.length * 2, n + vs.length));
        }
        System.arraycopy(vs, 0, a, n, vs.length);
        n += vs.length;
    }

    int size() {
        return n;
    }

    int get(int i) {
        return a[i];
    }

    void clear() {
        n = 0;
    }

    int[] toArray() {
        return Arrays.copyOf(a, n);
    }
}
