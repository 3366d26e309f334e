package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** The frame format: what goes in comes out bit for bit, and a reader rejects every kind of bad frame it can meet. */
class StageWireTest {
    private static final int WIDTH = 3;

    private static byte[] bytes(StageFrame f) {
        int[] len = new int[1];
        byte[] b = StageWire.encode(f, null, len);
        return java.util.Arrays.copyOf(b, len[0]);
    }

    private static StageFrame read(byte[] b, int width, int maxTokens) throws IOException {
        ByteArrayInputStream in = new ByteArrayInputStream(b);
        return StageWire.decode(
                (dst, off, n) -> {
                    if (in.readNBytes(dst, off, n) != n) {
                        throw new EOFException("stage 7 closed the connection");
                    }
                },
                width,
                maxTokens,
                "stage 7");
    }

    private static StageFrame hiddenFrame() {
        // Two sequences (2 + 1 tokens); hidden states with bit patterns a careless float path would change.
        float[] h = {
            1.5f,
            -0.0f,
            Float.intBitsToFloat(0x7fc01234), // a NaN with a payload
            Float.MIN_VALUE,
            Float.MAX_VALUE,
            Float.NEGATIVE_INFINITY,
            3.1415927f,
            -2.7182817f,
            1e-38f
        };
        return StageFrame.hidden(41, new int[] {2, 1}, new int[] {5, 9, 511}, h, WIDTH);
    }

    @Test
    void framesRoundTripBitForBit() throws IOException {
        StageFrame f = hiddenFrame();
        byte[] b = bytes(f);
        assertEquals(StageWire.frameBytes(2, 3, WIDTH), b.length);
        assertEquals(28 + 8 + 12 + 36 + 4, b.length);
        StageFrame back = read(b, WIDTH, 16);
        assertEquals(f, back);
        for (int i = 0; i < f.hidden().length; i++) {
            assertEquals(
                    Float.floatToRawIntBits(f.hidden()[i]), Float.floatToRawIntBits(back.hidden()[i]), "float " + i);
        }

        StageFrame tokens = StageFrame.tokens(0, new int[] {3}, new int[] {1, 2, 3});
        StageFrame t = read(bytes(tokens), WIDTH, 16);
        assertEquals(tokens, t);
        assertNull(t.hidden());

        assertEquals(StageFrame.end(12), read(bytes(StageFrame.end(12)), WIDTH, 16));

        StageFrame hello = read(bytes(StageFrame.hello(2, 3, 0x8000_0001_dead_beefL)), WIDTH, 16);
        assertEquals(StageFrame.Kind.HELLO, hello.kind());
        assertEquals(2, hello.seq());
        assertEquals(3, hello.width());
        assertEquals(0x8000_0001_dead_beefL, hello.nonce());
    }

    @Test
    void aFlippedBitAnywhereIsCaught() throws IOException {
        byte[] good = bytes(hiddenFrame());
        for (int i = 0; i < good.length; i++) {
            byte[] bad = good.clone();
            bad[i] ^= 0x10;
            int at = i;
            IOException e = assertThrows(IOException.class, () -> read(bad, WIDTH, 16), "byte " + at);
            assertTrue(e.getMessage().startsWith("stage 7 "), e.getMessage());
        }
        IOException e = assertThrows(IOException.class, () -> {
            byte[] bad = good.clone();
            bad[40] ^= 1; // a token id's bit: only the checksum can tell
            read(bad, WIDTH, 16);
        });
        assertTrue(e.getMessage().contains("checksum does not match"), e.getMessage());
    }

    @Test
    void badHeadersFailBeforeAnyBodyIsRead() {
        byte[] good = bytes(hiddenFrame());
        byte[] notOurs = "GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0".getBytes();
        assertEquals(
                "stage 7 sent a frame starting 0x20544547, not a Scorch pipeline frame (0x5343504c)",
                assertThrows(IOException.class, () -> read(notOurs, WIDTH, 16)).getMessage());
        assertEquals(
                "stage 7 sent hidden states of width 3 but this model's hidden size is 4",
                assertThrows(IOException.class, () -> read(good, 4, 16)).getMessage());
        assertEquals(
                "stage 7 sent a BATCH frame of 2 sequences and 3 tokens (at most 2 tokens, no more sequences than"
                        + " tokens)",
                assertThrows(IOException.class, () -> read(good, WIDTH, 2)).getMessage());
        byte[] huge = good.clone(); // T = 2^31 - 1: refused from the header, never allocated
        ByteBuffer.wrap(huge).order(ByteOrder.LITTLE_ENDIAN).putInt(20, Integer.MAX_VALUE);
        assertTrue(assertThrows(IOException.class, () -> read(huge, WIDTH, 1 << 20))
                .getMessage()
                .contains("2147483647 tokens"));
        byte[] kind = good.clone();
        ByteBuffer.wrap(kind).order(ByteOrder.LITTLE_ENDIAN).putInt(4, 9);
        assertEquals(
                "stage 7 sent a frame of unknown kind 9",
                assertThrows(IOException.class, () -> read(kind, WIDTH, 16)).getMessage());
    }

    @Test
    void aTruncatedFrameIsAnEndOfStream() {
        byte[] good = bytes(hiddenFrame());
        for (int cut : new int[] {0, 10, 28, good.length - 1}) {
            byte[] part = java.util.Arrays.copyOf(good, cut);
            assertThrows(EOFException.class, () -> read(part, WIDTH, 16), "cut at " + cut);
        }
    }

    @Test
    void inconsistentFramesAreNotMade() {
        assertThrows(IllegalArgumentException.class, () -> StageFrame.tokens(0, new int[] {2}, new int[] {1, 2, 3}));
        assertThrows(IllegalArgumentException.class, () -> StageFrame.tokens(0, new int[] {0, 3}, new int[] {1, 2, 3}));
        assertThrows(
                IllegalArgumentException.class,
                () -> StageFrame.hidden(0, new int[] {1}, new int[] {1}, new float[] {1, 2}, 3));
    }

    @Test
    void aReusedBufferGivesTheSameBytes() {
        int[] len = new int[1];
        byte[] big = new byte[4096];
        byte[] b = StageWire.encode(hiddenFrame(), big, len);
        assertTrue(b == big);
        assertArrayEquals(bytes(hiddenFrame()), java.util.Arrays.copyOf(b, len[0]));
    }
}
