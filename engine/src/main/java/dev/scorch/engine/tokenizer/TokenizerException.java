package dev.scorch.engine.tokenizer;

/** A tokenizer file Scorch cannot use: the message names the file and, where it applies, the field. */
public final class TokenizerException extends RuntimeException {
    public TokenizerException(String message) {
        super(message);
    }

    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
