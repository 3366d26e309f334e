package dev.scorch.jobs.lmeval;

import dev.scorch.engine.tokenizer.Tokenizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Requests to token ids as lm-eval's Hugging Face backend makes them (models/huggingface.py, api/model.py):
 *
 * <ul>
 *   <li>tok_encode: the tokenizer's own special-token default (BOS through its post-processor), except that a text that
 *       already starts with the prefix token's text gets none;
 *   <li>_encode_pair: trailing whitespace of the context moved to the continuation; the continuation's tokens are
 *       encode(context + continuation)[len(encode(context)):];
 *   <li>an empty context: the continuation encoded without special tokens, after the prefix token (BOS, else EOS) unless
 *       the continuation already starts with it (then its first token is the context);
 *   <li>the scored sequence: (context + continuation)[-(max_length + 1):], its last len(continuation) tokens scored;
 *   <li>loglikelihood_rolling: get_rolling_token_windows(tok_encode(text), prefix, max_length, context_len 1) made
 *       disjoint, each window scored as a (context, continuation) pair;
 *   <li>generate_until: the context encoded as tok_batch_encode does, left-truncated to max_length - max_gen_toks.
 * </ul>
 */
public final class LmTokens {
    /** A scored sequence and how many of its last tokens are the continuation. */
    public record Scored(int[] tokens, int continuationLength) {}

    private final Tokenizer tok;
    private final int maxLength;
    private final int prefixId;
    private final String prefixText;
    private final String bosText;

    public LmTokens(Tokenizer tok, int maxLength) {
        this.tok = tok;
        this.maxLength = maxLength;
        Integer bos = tok.bosTokenId();
        if (bos == null && tok.eosTokenIds().isEmpty()) {
            throw new IllegalArgumentException("the tokenizer has neither a BOS nor an EOS token for lm-eval's prefix");
        }
        this.prefixId = bos != null ? bos : tok.eosTokenIds().get(0);
        this.prefixText = tok.decode(new int[] {prefixId}, false);
        this.bosText = bos == null ? null : tok.decode(new int[] {bos}, false);
    }

    public int maxLength() {
        return maxLength;
    }

    public int prefixId() {
        return prefixId;
    }

    /** tok_encode(text): add_special_tokens left to the tokenizer unless the text starts with the prefix's text. */
    public int[] encode(String text) {
        boolean special = !(prefixText != null && !prefixText.isEmpty() && text.startsWith(prefixText));
        return tok.encode(text, special);
    }

    /** The scored sequence of a loglikelihood request (context, continuation). */
    public Scored loglikelihood(String context, String continuation) {
        int[] ctx;
        int[] cont;
        if (context.isEmpty()) {
            cont = tok.encode(continuation, false);
            if (cont.length == 0) {
                throw new IllegalArgumentException("an empty continuation after an empty context");
            }
            if (cont[0] != prefixId) {
                ctx = new int[] {prefixId};
            } else {
                ctx = new int[] {cont[0]};
                cont = Arrays.copyOfRange(cont, 1, cont.length);
            }
        } else {
            int n = context.length();
            while (n > 0 && isSpace(context.charAt(n - 1))) {
                n--;
            }
            continuation = context.substring(n) + continuation;
            context = context.substring(0, n);
            int[] whole = encode(context + continuation);
            ctx = encode(context);
            cont = Arrays.copyOfRange(whole, Math.min(ctx.length, whole.length), whole.length);
        }
        return pair(ctx, cont);
    }

    /** (context + continuation)[-(max_length + 1):] and the continuation's length. */
    Scored pair(int[] ctx, int[] cont) {
        if (cont.length > maxLength) {
            throw new IllegalArgumentException(
                    "a continuation of " + cont.length + " tokens is longer than the model's " + maxLength);
        }
        int[] all = Arrays.copyOf(ctx, ctx.length + cont.length);
        System.arraycopy(cont, 0, all, ctx.length, cont.length);
        int from = Math.max(0, all.length - (maxLength + 1));
        return new Scored(Arrays.copyOfRange(all, from, all.length), cont.length);
    }

    /** The windows of a loglikelihood_rolling request, each a scored sequence; their sums add up to the text's. */
    public List<Scored> rolling(String text) {
        int[] tokens = encode(text);
        List<Scored> out = new ArrayList<>();
        if (tokens.length == 0) {
            return out;
        }
        int predLen = maxLength; // max_seq_len - context_len + 1 with context_len 1
        int first = Math.min(maxLength, tokens.length);
        int[] a = new int[first];
        a[0] = prefixId;
        System.arraycopy(tokens, 0, a, 1, first - 1);
        out.add(disjoint(a, Arrays.copyOfRange(tokens, 0, first)));
        int predicted = first;
        while (predicted < tokens.length) {
            int len = Math.min(tokens.length - predicted, predLen);
            int end = predicted + len;
            int[] ctx = slice(tokens, end - maxLength - 1, end - 1);
            out.add(disjoint(ctx, Arrays.copyOfRange(tokens, end - len, end)));
            predicted += len;
        }
        return out;
    }

    /** Python's list[a:b] with a possibly negative start. */
    private static int[] slice(int[] xs, int a, int b) {
        if (a < 0) {
            a = Math.max(0, xs.length + a);
        }
        return Arrays.copyOfRange(xs, Math.min(a, b), b);
    }

    /** make_disjoint_window: the context's tokens that the continuation does not already hold. */
    private Scored disjoint(int[] a, int[] b) {
        return pair(Arrays.copyOf(a, a.length - (b.length - 1)), b);
    }

    /** A generate_until context: tok_batch_encode, left-truncated to max_length - max_gen_toks. */
    public int[] generationContext(String context, int maxGenToks) {
        if (maxGenToks >= maxLength) {
            throw new IllegalArgumentException("max_gen_toks " + maxGenToks
                    + " must be less than the model's maximum sequence length " + maxLength);
        }
        boolean special = !(bosText != null && !bosText.isEmpty() && context.startsWith(bosText));
        int[] ids = tok.encode(context, special);
        int keep = maxLength - maxGenToks;
        return ids.length > keep ? Arrays.copyOfRange(ids, ids.length - keep, ids.length) : ids;
    }

    /** The decoded text of generated tokens (special tokens skipped), cut before the first of each stop string in turn. */
    public String completion(int[] generated, List<String> until) {
        String s = tok.decode(generated, true);
        for (String term : stops(until)) {
            if (!term.isEmpty()) {
                int i = s.indexOf(term);
                if (i >= 0) {
                    s = s.substring(0, i);
                }
            }
        }
        return s;
    }

    /** handle_stop_sequences: the task's until plus the EOS token's text. */
    public List<String> stops(List<String> until) {
        List<String> out = new ArrayList<>(until == null ? List.of() : until);
        if (!tok.eosTokenIds().isEmpty()) {
            String eos = tok.decode(new int[] {tok.eosTokenIds().get(0)}, false);
            if (!out.contains(eos)) {
                out.add(eos);
            }
        }
        return out;
    }

    /** Python's str.isspace for one character (what rstrip() strips). */
    static boolean isSpace(char c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c) || (c >= 0x1c && c <= 0x1f) || c == 0x85;
    }
}
