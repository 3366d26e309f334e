package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

/** The attention softmax's own exp: close to Math.exp over the range softmax uses, and the same bits every call. */
class VecExpTest {
  @Test
  void closeToMathExpOnTheSoftmaxRange() {
    int l = CpuOps.VecMath.S.length();
    float[] x = new float[l];
    float[] y = new float[l];
    double worst = 0;
    for (int i = 0; i <= 200_000; i += l) {
      for (int k = 0; k < l; k++) {
        x[k] = Math.max(-87f, -87f * (i + k) / 200_000f);
      }
      CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
      for (int k = 0; k < l; k++) {
        double e = Math.exp(x[k]);
        worst = Math.max(worst, Math.abs(y[k] - e) / e);
      }
    }
    assertTrue(worst < 5e-7, "max relative error " + worst);
    x[0] = 0f;
    CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
    assertEquals(1f, y[0], 0f, "e^0 is exactly 1");
    x[0] = Float.NEGATIVE_INFINITY;
    CpuOps.VecMath.exp(FloatVector.fromArray(CpuOps.VecMath.S, x, 0)).intoArray(y, 0);
    assertTrue(y[0] >= 0 && y[0] < 1e-37, "masked keys weigh nothing: " + y[0]);
  }

  @Test
  void logSumExpMatchesTheDoubleLoopAndKeepsItsBitsAtAnyOffset() {
    java.util.Random r = new java.util.Random(11);
    for (int n : new int[] {1, 7, 8, 33, 32768}) {
      float[] x = new float[n + 3];
      for (int i = 0; i < x.length; i++) {
        x[i] = (float) (r.nextGaussian() * 4);
      }
      double ref = dev.scorch.engine.scoring.LogSoftmax.logSumExp(x, 1, n);
      double fast = CpuOps.VecMath.logSumExp(x, 1, n);
      assertEquals(ref, fast, 3e-7, "n = " + n);
      // The same row at another offset (another place in a batch's logits) gives the same bits.
      float[] moved = new float[n + 5];
      System.arraycopy(x, 1, moved, 5, n);
      assertEquals(fast, CpuOps.VecMath.logSumExp(moved, 5, n), 0.0, "n = " + n + " moved");
    }
    float[] masked = {Float.NEGATIVE_INFINITY, 2f, Float.NEGATIVE_INFINITY};
    assertEquals(2.0, CpuOps.VecMath.logSumExp(masked, 0, 3), 1e-7, "-inf logits weigh nothing");
  }
}
