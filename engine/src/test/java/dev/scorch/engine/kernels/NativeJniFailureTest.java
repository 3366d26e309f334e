package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The JNI wrappers when the JVM cannot give them an address: a buffer that is not direct has none
 * (GetDirectBufferAddress returns NULL), the case the Java side's checks normally keep from them. They must throw,
 * not return having done nothing (which left the output as it was: stale numbers taken for results). The private
 * natives are called straight, past those checks. Skipped where the native library is not loaded.
 */
class NativeJniFailureTest {
    @BeforeAll
    static void nativeLoaded() {
        assumeTrue(NativeCpu.available(), "native library: " + NativeCpu.status());
    }

    private static Throwable call(Class<?> owner, String name, Object... args) throws Exception {
        Method m = Arrays.stream(owner.getDeclaredMethods())
                .filter(x -> x.getName().equals(name))
                .findFirst()
                .orElseThrow();
        m.setAccessible(true);
        InvocationTargetException e = assertThrows(InvocationTargetException.class, () -> m.invoke(null, args), name);
        return e.getCause();
    }

    private static void assertNoAddress(Throwable t, String what) {
        assertEquals(IllegalArgumentException.class, t.getClass(), String.valueOf(t));
        assertEquals(what + " is not a direct buffer", t.getMessage());
    }

    @Test
    void transposeIntoAHeapBufferThrows() throws Exception {
        float[] x = new float[16 * 8];
        Throwable t = call(NativeCpu.class, "transposeTile0", 16, x, 0, 16, 8, ByteBuffer.allocate(16 * 8 * 4), 0);
        assertNoAddress(t, "xt");
    }

    @Test
    void kernelBlockOnHeapBuffersThrows() throws Exception {
        Throwable t = call(
                NativeCpu.class,
                "kernelBlock0",
                16,
                ByteBuffer.allocate(16 * 8 * 4),
                0,
                1,
                8,
                0,
                8,
                new float[6 * 8],
                1,
                NativeCpu.alignedFloats(6 * 16),
                16,
                true,
                null,
                0,
                0,
                0,
                0,
                0);
        assertNoAddress(t, "xt");
        t = call(
                NativeCpu.class,
                "kernelBlock0",
                16,
                NativeCpu.alignedFloats(16 * 8),
                0,
                1,
                8,
                0,
                8,
                new float[6 * 8],
                1,
                ByteBuffer.allocate(6 * 16 * 4),
                16,
                true,
                null,
                0,
                0,
                0,
                0,
                0);
        assertNoAddress(t, "c");
    }

    @Test
    void mappedDecodersOnAHeapBufferThrow() throws Exception {
        float[] dst = new float[16];
        Arrays.fill(dst, 7f);
        Throwable t = call(NativeCpu.class, "bf16RowsMapped0", ByteBuffer.allocate(64), 0L, 16, 1, 16, dst);
        assertNoAddress(t, "the mapping");
        t = call(
                NativeCpu.class,
                "fp8RowsMapped0",
                ByteBuffer.allocate(64),
                0L,
                16,
                1,
                16,
                new float[] {1f},
                1,
                0,
                16,
                dst);
        assertNoAddress(t, "the mapping");
        assertEquals(7f, dst[0]);
    }

    @Test
    void attentionWithAHeapScratchThrows() throws Exception {
        float[] out = new float[16];
        Throwable t = call(
                NativeAttention.class,
                "attendHead0",
                new float[32],
                new float[32],
                new float[16],
                1,
                16,
                0,
                16,
                0,
                1,
                0,
                1f,
                0,
                out,
                ByteBuffer.allocate(1024));
        assertNoAddress(t, "scratch");
    }
}
