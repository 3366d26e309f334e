package dev.scorch.engine.kernels;

/**
 * Vector accumulators finished as scalars. Kernels store their accumulators into a lanes array and finish them
 * from there rather than passing vector objects to methods: C2 boxes a vector passed to a method it does not
 * inline, an allocation and a slow path on every call.
 */
final class Lanes {
    private Lanes() {}

    /** lanes[lo .. lo + l) added in a fixed tree, halves folded onto each other (l/2, l/4, ... 1), in place. */
    static float foldTree(float[] lanes, int lo, int l) {
        for (int h = l / 2; h > 0; h /= 2) {
            for (int i = 0; i < h; i++) {
                lanes[lo + i] += lanes[lo + i + h];
            }
        }
        return lanes[lo];
    }
}
