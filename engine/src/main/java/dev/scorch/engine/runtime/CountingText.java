package dev.scorch.engine.runtime;

/**
 * A text that counts the characters read from it and throws {@link TooManySteps} once a budget is spent: a pattern
 * from an untrusted file (a tokenizer's split regex, a quantization config's {@code re:} entry) runs on it, since
 * java.util.regex cannot be interrupted but reads its input only through {@link #charAt}. Sub-sequences share the budget.
 */
public final class CountingText implements CharSequence {
    /** Thrown when the budget is spent; no stack trace, it only unwinds. */
    public static final class TooManySteps extends RuntimeException {
        private static final long serialVersionUID = 1L;

        TooManySteps() {
            super(null, null, false, false);
        }
    }

    private final String s;
    private final long[] left; // shared with sub-sequences

    public CountingText(String s, long steps) {
        this(s, new long[] {steps});
    }

    private CountingText(String s, long[] left) {
        this.s = s;
        this.left = left;
    }

    /** Steps not yet spent (negative once spent). */
    public long left() {
        return left[0];
    }

    @Override
    public char charAt(int index) {
        if (--left[0] < 0) {
            throw new TooManySteps();
        }
        return s.charAt(index);
    }

    @Override
    public int length() {
        return s.length();
    }

    @Override
    public CharSequence subSequence(int start, int end) {
        return new CountingText(s.substring(start, end), left);
    }

    @Override
    public String toString() {
        return s;
    }
}
