package dev.scorch.engine.tokenizer;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * GPT-2's byte-to-unicode table, used by byte-level BPE vocabularies: every byte gets a printable character
 * (printable Latin-1 bytes map to themselves, the other 68 to U+0100 onwards, so a space is "Ġ" and a newline
 * "Ċ").
 */
final class ByteLevel {
    /** Character for each byte. */
    static final char[] BYTE_TO_CHAR = new char[256];
    /** Byte for each character of the table, -1 for characters outside it (indexed by char, < 0x200). */
    private static final short[] CHAR_TO_BYTE = new short[0x200];

    static {
        java.util.Arrays.fill(CHAR_TO_BYTE, (short) -1);
        int n = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char c = printable ? (char) b : (char) (256 + n++);
            BYTE_TO_CHAR[b] = c;
            CHAR_TO_BYTE[c] = (short) b;
        }
    }

    private ByteLevel() {}

    /** The byte-level string of {@code text}'s UTF-8 bytes. */
    static String encode(String text) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        char[] out = new char[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            out[i] = BYTE_TO_CHAR[bytes[i] & 0xFF];
        }
        return new String(out);
    }

    /**
     * The bytes a vocabulary token stands for. As Hugging Face's ByteLevel decoder does, a token with any
     * character outside the table (added tokens such as "<｜User｜>") stands for its own UTF-8 bytes.
     */
    static byte[] decodeToken(String token) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(token.length());
        for (int i = 0; i < token.length(); i++) {
            char c = token.charAt(i);
            int b = c < CHAR_TO_BYTE.length ? CHAR_TO_BYTE[c] : -1;
            if (b < 0) {
                return token.getBytes(StandardCharsets.UTF_8);
            }
            out.write(b);
        }
        return out.toByteArray();
    }
}
