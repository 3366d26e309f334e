package dev.scorch.engine.tokenizer;

/**
 * A token matched in the raw text before pre-tokenization, with Hugging Face's flags: {@code lstrip}/{@code
 * rstrip} swallow the whitespace before/after it, {@code singleWord} matches only between non-word
 * characters, {@code normalized} matches against the normalized text, {@code special} marks control tokens
 * (skipped when decoding with skipSpecialTokens).
 */
public record AddedToken(
        int id,
        String content,
        boolean special,
        boolean lstrip,
        boolean rstrip,
        boolean singleWord,
        boolean normalized) {}
