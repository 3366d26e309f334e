package dev.scorch.engine.device;

import java.util.function.LongFunction;

/**
 * How a pass runs the seam's composite calls ({@link Device#mlp}, {@link Device#mlaPrefill}, {@link Device#moeExperts}):
 * each row's GEMM rule and the scratch their intermediates come from. Built once per pass ({@code Pass.rules}); a pass
 * of the same rule reuses it.
 *
 * @param precision the GEMMs' precision
 * @param rows      which rows are decode rows ({@link Device#gemm(Buf, int, int, Buf, int, Buf, GemmPrecision,
 *                  DecodeRows)})
 * @param floats    F32 scratch of n elements, valid until the pass gives it back
 * @param ints      I32 scratch, as floats
 */
public record PassRules(GemmPrecision precision, DecodeRows rows, LongFunction<Buf> floats, LongFunction<Buf> ints) {}
