package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** The read-bandwidth probe's native stream reads every word of its range, and nothing outside it. */
class NativeReadStreamTest {
    @Test
    void everyWordOfTheRangeIsRead() {
        Assumptions.assumeTrue(NativeCpu.available(), "no native library here");
        ByteBuffer buf = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.nativeOrder());
        java.util.Random rnd = new java.util.Random(7);
        for (int i = 0; i < buf.capacity(); i += 4) {
            buf.putInt(i, rnd.nextInt());
        }
        // Lengths around the 128-byte step and the 32-byte tail; offsets not aligned to a vector.
        for (int off : new int[] {0, 4, 36, 1000}) {
            for (int len : new int[] {0, 32, 96, 128, 160, 4096, 4096 + 96, 60000}) {
                int want = 0;
                for (int i = off; i < off + len; i += 4) {
                    want ^= buf.getInt(i);
                }
                assertEquals(want, NativeCpu.readStream(buf, off, len), "offset " + off + ", " + len + " bytes");
            }
        }
    }

    @Test
    void aRangeOutsideTheBufferIsRefused() {
        Assumptions.assumeTrue(NativeCpu.available(), "no native library here");
        ByteBuffer buf = ByteBuffer.allocateDirect(4096);
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.readStream(buf, 4000, 128));
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.readStream(buf, -32, 64));
        assertThrows(IndexOutOfBoundsException.class, () -> NativeCpu.readStream(ByteBuffer.allocate(64), 0, 32));
    }
}
