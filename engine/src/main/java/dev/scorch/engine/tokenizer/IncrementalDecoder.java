package dev.scorch.engine.tokenizer;

import java.util.Arrays;

/**
 * Turns a stream of token ids back into text, one id at a time, for streaming generation output.
 *
 * <p>Byte-level tokens do not line up with characters: one emoji (4 UTF-8 bytes) may be spread over two or
 * three tokens. Each {@link #feed(int)} appends the token's bytes to a pending buffer and returns only the
 * text that is complete so far; the bytes of a character that later tokens may still complete (at most 3)
 * stay pending.
 *
 * <p>Invalid UTF-8 policy: bytes that can never become valid, whatever follows (a stray continuation byte,
 * 0xC0/0xC1/0xF5..0xFF, a lead byte followed by a non-continuation byte, an overlong or surrogate prefix),
 * are emitted at once as U+FFFD, one per maximal invalid subpart (as Rust's from_utf8_lossy, hence Hugging
 * Face's decode, does). An incomplete character still pending when the stream ends becomes one U+FFFD in {@link
 * #finish()}. Hence the concatenation of every {@code feed} result and {@code finish()} equals
 * {@code tokenizer.decode(allIds, skipSpecialTokens)}.
 *
 * <p>Not thread-safe: one instance per sequence.
 */
public final class IncrementalDecoder {
    private final Tokenizer tokenizer;
    private final boolean skipSpecialTokens;
    private byte[] pending = new byte[16];
    private int pendingLen;

    public IncrementalDecoder(Tokenizer tokenizer, boolean skipSpecialTokens) {
        this.tokenizer = tokenizer;
        this.skipSpecialTokens = skipSpecialTokens;
    }

    /** Adds one token; returns the newly completed text (possibly empty, never null). */
    public String feed(int id) {
        if (skipSpecialTokens && tokenizer.isSpecial(id)) {
            return "";
        }
        byte[] b = tokenizer.tokenBytes(id);
        if (pendingLen + b.length > pending.length) {
            pending = Arrays.copyOf(pending, Math.max(pending.length * 2, pendingLen + b.length));
        }
        System.arraycopy(b, 0, pending, pendingLen, b.length);
        pendingLen += b.length;
        return drain(false);
    }

    /** Ends the stream: returns what is still pending (an incomplete character becomes U+FFFD) and resets. */
    public String finish() {
        return drain(true);
    }

    /** Number of bytes held back waiting for the rest of a character. */
    public int pendingBytes() {
        return pendingLen;
    }

    private String drain(boolean all) {
        int cut = all ? pendingLen : pendingLen - incompleteTail(pending, pendingLen);
        if (cut == 0) {
            return "";
        }
        String out = Utf8.decode(pending, 0, cut);
        System.arraycopy(pending, cut, pending, 0, pendingLen - cut);
        pendingLen -= cut;
        return out;
    }

    /**
     * Length of the trailing bytes of {@code b[0..len)} that form a valid but unfinished UTF-8 sequence (a lead
     * byte plus fewer continuation bytes than it needs), or 0 when the buffer ends on a character boundary or
     * on bytes that can never be completed.
     */
    static int incompleteTail(byte[] b, int len) {
        for (int back = 1; back <= Math.min(3, len); back++) {
            int lead = b[len - back] & 0xFF;
            if (lead < 0x80) {
                return 0; // ASCII: everything up to here is complete
            }
            if (lead < 0xC0) {
                continue; // continuation byte: look further back for the lead
            }
            int need = lead < 0xC2 ? -1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF5 ? 4 : -1;
            if (need <= back) {
                return 0; // invalid lead, or the sequence is already long enough (complete or malformed)
            }
            if (back >= 2 && !Utf8.secondOk(lead, b[len - back + 1] & 0xFF)) {
                return 0; // e.g. E0 80: overlong, can never become valid
            }
            for (int i = len - back + 2; i < len; i++) {
                if ((b[i] & 0xC0) != 0x80) {
                    return 0;
                }
            }
            return back;
        }
        return 0;
    }
}
