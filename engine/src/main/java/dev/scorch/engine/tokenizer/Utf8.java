package dev.scorch.engine.tokenizer;

/**
 * UTF-8 decoding with U+FFFD for each maximal invalid subpart (the Unicode recommendation, which Rust's
 * String::from_utf8_lossy and Python's errors="replace" follow; Java's own decoder differs on encoded
 * surrogates such as ED A0 80, replacing three bytes with a single U+FFFD).
 */
final class Utf8 {
    private Utf8() {}

    static String decode(byte[] b, int off, int len) {
        char[] out = new char[len];
        int n = 0;
        int i = off;
        int end = off + len;
        while (i < end) {
            int c = b[i] & 0xFF;
            if (c < 0x80) {
                out[n++] = (char) c;
                i++;
                continue;
            }
            int need = c < 0xC2 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : c < 0xF5 ? 3 : 0;
            if (need == 0) {
                out[n++] = '\uFFFD'; // continuation byte without a lead, or a byte that never starts a character
                i++;
                continue;
            }
            int cp = c & (0x3F >> need);
            int j = i + 1;
            boolean ok = true;
            for (int k = 0; k < need; k++, j++) {
                if (j >= end) {
                    ok = false;
                    break;
                }
                int cc = b[j] & 0xFF;
                boolean valid = k == 0 ? secondOk(c, cc) : (cc & 0xC0) == 0x80;
                if (!valid) {
                    ok = false;
                    break;
                }
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (!ok) {
                out[n++] = '\uFFFD'; // the maximal subpart b[i, j) is replaced as one
                i = j;
                continue;
            }
            if (cp >= 0x10000) {
                out[n++] = Character.highSurrogate(cp);
                out[n++] = Character.lowSurrogate(cp);
            } else {
                out[n++] = (char) cp;
            }
            i = j;
        }
        return new String(out, 0, n);
    }

    /** Allowed second bytes after a lead (Unicode Table 3-7): excludes overlongs, surrogates, > U+10FFFF. */
    static boolean secondOk(int lead, int second) {
        switch (lead) {
            case 0xE0:
                return second >= 0xA0 && second <= 0xBF;
            case 0xED:
                return second >= 0x80 && second <= 0x9F;
            case 0xF0:
                return second >= 0x90 && second <= 0xBF;
            case 0xF4:
                return second >= 0x80 && second <= 0x8F;
            default:
                return second >= 0x80 && second <= 0xBF;
        }
    }

    /** The text of token ids given each id's bytes; ids outside the table are dropped, specials too when asked. */
    static String decodeTokens(int[] ids, byte[][] idToBytes, boolean[] special, boolean skipSpecialTokens) {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream(ids.length * 4);
        for (int id : ids) {
            if (id >= 0 && id < idToBytes.length && !(skipSpecialTokens && special[id])) {
                bytes.writeBytes(idToBytes[id]);
            }
        }
        return decode(bytes.toByteArray(), 0, bytes.size());
    }
}
