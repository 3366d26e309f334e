package dev.scorch.udfs.pipeline;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32;

/**
 * The bytes of a {@link StageFrame}, little-endian: a 28-byte header (magic "SCPL", kind, seq, sequences B, tokens T,
 * hidden width H), the body (B sequence lengths, T token ids, T*H fp32 hidden states as their raw bits), then a CRC-32
 * of header and body. A reader trusts nothing it has not checked: the magic, the kind, the sizes against its limits
 * before it allocates, the width against the model's hidden size, and the checksum before it hands the frame on.
 */
public final class StageWire {
    static final int MAGIC = 0x5343504c; // "SCPL"
    static final int HEADER_BYTES = 28;
    static final int TRAILER_BYTES = 4;
    /** A Java array holds at most this many bytes. */
    static final long MAX_FRAME_BYTES = Integer.MAX_VALUE - 16;

    private StageWire() {}

    /** Bytes a frame of B sequences, T tokens and width H takes on the wire. */
    static long frameBytes(long b, long t, long h) {
        return HEADER_BYTES + 4 * b + 4 * t + 4 * t * h + TRAILER_BYTES;
    }

    /** The frame's bytes, into buf when it is large enough (else a new array); returns the array and its length. */
    static byte[] encode(StageFrame f, byte[] buf, int[] length) {
        long bytes = frameBytes(f.seqLen().length, f.numTokens(), f.hidden() == null ? 0 : f.width());
        if (bytes > MAX_FRAME_BYTES) {
            throw new IllegalArgumentException(
                    f + " takes " + bytes + " bytes, over a frame's " + MAX_FRAME_BYTES + ": lower --max-batch-tokens");
        }
        byte[] out = buf != null && buf.length >= bytes ? buf : new byte[(int) bytes];
        ByteBuffer b = ByteBuffer.wrap(out, 0, (int) bytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(MAGIC)
                .putInt(f.kind().code)
                .putLong(f.seq())
                .putInt(f.seqLen().length)
                .putInt(f.numTokens())
                .putInt(f.width()); // a HELLO's ring size; 0 for a batch without hidden states
        b.asIntBuffer().put(f.seqLen());
        b.position(b.position() + 4 * f.seqLen().length);
        b.asIntBuffer().put(f.tokens());
        b.position(b.position() + 4 * f.numTokens());
        if (f.hidden() != null) {
            b.asFloatBuffer().put(f.hidden()); // raw bits: FloatBuffer.put never canonicalises NaNs
            b.position(b.position() + 4 * f.hidden().length);
        }
        CRC32 crc = new CRC32();
        crc.update(out, 0, b.position());
        b.putInt((int) crc.getValue());
        length[0] = (int) bytes;
        return out;
    }

    /** Where a reader gets its bytes: exactly n of them into dst at off, or an IOException. */
    interface Source {
        void readFully(byte[] dst, int off, int n) throws IOException;
    }

    /**
     * Reads one frame. width is the model's hidden size: a frame's hidden states must have it. maxTokens bounds T
     * (the largest batch a sender may send), so a corrupt header cannot make the reader allocate gigabytes.
     */
    static StageFrame decode(Source in, int width, int maxTokens, String from) throws IOException {
        byte[] header = new byte[HEADER_BYTES];
        in.readFully(header, 0, HEADER_BYTES);
        ByteBuffer h = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
        int magic = h.getInt();
        if (magic != MAGIC) {
            throw new IOException(String.format(
                    "%s sent a frame starting 0x%08x, not a Scorch pipeline frame (0x%08x)", from, magic, MAGIC));
        }
        int code = h.getInt();
        StageFrame.Kind kind = StageFrame.Kind.of(code);
        long seq = h.getLong();
        int b = h.getInt();
        int t = h.getInt();
        int w = h.getInt();
        if (kind == null) {
            throw new IOException(from + " sent a frame of unknown kind " + code);
        }
        if (t < 0 || t > maxTokens || b < 0 || b > t || (kind != StageFrame.Kind.BATCH && b != 0)) {
            throw new IOException(from + " sent a " + kind + " frame of " + b + " sequences and " + t
                    + " tokens (at most " + maxTokens + " tokens, no more sequences than tokens)");
        }
        boolean hello = kind == StageFrame.Kind.HELLO;
        if ((hello && t != 2) || (kind == StageFrame.Kind.END && t != 0)) {
            throw new IOException(from + " sent a " + kind + " frame of " + t + " tokens");
        }
        if (!hello && w != 0 && w != width) {
            throw new IOException(
                    from + " sent hidden states of width " + w + " but this model's hidden size is " + width);
        }
        long bodyBytes = frameBytes(b, t, hello ? 0 : w) - HEADER_BYTES;
        if (bodyBytes + HEADER_BYTES > MAX_FRAME_BYTES) {
            throw new IOException(from + " sent a frame of " + (bodyBytes + HEADER_BYTES) + " bytes");
        }
        byte[] body = new byte[(int) bodyBytes];
        in.readFully(body, 0, body.length);
        CRC32 crc = new CRC32();
        crc.update(header);
        crc.update(body, 0, body.length - TRAILER_BYTES);
        ByteBuffer d = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        int sent = d.getInt(body.length - TRAILER_BYTES);
        if (sent != (int) crc.getValue()) {
            throw new IOException(String.format(
                    "%s sent %s #%d whose checksum does not match (CRC-32 0x%08x, computed 0x%08x): the bytes"
                            + " changed in transit",
                    from, kind, seq, sent, (int) crc.getValue()));
        }
        int[] seqLen = new int[b];
        d.asIntBuffer().get(seqLen);
        d.position(4 * b);
        int[] tokens = new int[t];
        d.asIntBuffer().get(tokens);
        d.position(4 * b + 4 * t);
        if (hello) {
            return new StageFrame(kind, seq, seqLen, tokens, null, w);
        }
        float[] hidden = null;
        if (w != 0) {
            hidden = new float[Math.toIntExact((long) t * w)];
            d.asFloatBuffer().get(hidden);
        }
        try {
            return new StageFrame(kind, seq, seqLen, tokens, hidden, w);
        } catch (IllegalArgumentException e) {
            throw new IOException(from + " sent an inconsistent frame: " + e.getMessage(), e);
        }
    }
}
