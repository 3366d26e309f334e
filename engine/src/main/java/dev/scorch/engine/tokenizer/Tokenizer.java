package dev.scorch.engine.tokenizer;

import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Text to token ids and back, for one model's vocabulary. Implementations are immutable after loading and
 * safe to share between threads.
 */
public interface Tokenizer {

    /**
     * Token ids for {@code text}. Added/special tokens written in the text (e.g. {@code <｜User｜>}) are always
     * recognised; {@code addSpecialTokens} only controls what the post-processing adds around the text (BOS,
     * EOS), as {@code tokenizer(text, add_special_tokens=...)} does in Python.
     */
    int[] encode(String text, boolean addSpecialTokens);

    /** The text of {@code ids}; bytes that are not valid UTF-8 come out as U+FFFD. */
    String decode(int[] ids, boolean skipSpecialTokens);

    /** One more than the largest id this tokenizer can produce (base vocabulary and added tokens). */
    int vocabSize();

    /** The beginning-of-sequence id, or null when the tokenizer has none. */
    Integer bosTokenId();

    /** End-of-sequence ids (usually one); empty when unknown. */
    List<Integer> eosTokenIds();

    /** The id of a token given by its text as stored in the vocabulary (byte-level form for BPE vocabularies). */
    OptionalInt tokenId(String token);

    /** The raw bytes token {@code id} stands for (UTF-8 of the content for added tokens). */
    byte[] tokenBytes(int id);

    /** Whether {@code id} is a special token (skipped by {@code decode(ids, true)}). */
    boolean isSpecial(int id);

    /** The chat template from tokenizer_config.json, if it has one. */
    default Optional<ChatTemplate> chatTemplate() {
        return Optional.empty();
    }

    /** A decoder for streaming output: feed ids one at a time, get back only complete characters. */
    default IncrementalDecoder incrementalDecoder(boolean skipSpecialTokens) {
        return new IncrementalDecoder(this, skipSpecialTokens);
    }
}
