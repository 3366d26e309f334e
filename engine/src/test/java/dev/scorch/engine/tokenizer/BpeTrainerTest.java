package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The demo tokenizer's trainer: deterministic merges, a tokenizer.json the loader reads, lossless round trips. */
class BpeTrainerTest {
    @TempDir
    Path dir;

    static final String CORPUS = "the cat and the hat and the bat sat on the mat; the cat sat. the the the";

    @Test
    void mergesAreTheMostFrequentPairsInOrder() {
        List<String> merges = BpeTrainer.train(CORPUS, 3);
        assertEquals(BpeTrainer.train(CORPUS, 3), merges, "deterministic");
        // "h e" is in all 8 the's, then "t he" (8); then "a t" (cat, hat, bat, sat, mat: 7) ties with "Ġ the" (7)
        // and wins as the smaller pair ('a' < 'Ġ').
        assertEquals(List.of("h e", "t he", "a t"), merges);
    }

    @Test
    void writtenTokenizerLoadsEncodesWithMergesAndRoundTrips() throws Exception {
        List<String> merges = BpeTrainer.train(CORPUS, 50);
        BpeTrainer.write(dir, merges, 510, 511, "<|bos|>", "<|eos|>");
        Tokenizer tok = Tokenizers.load(dir).orElseThrow();
        int[] ids = tok.encode("the cat", false);
        assertTrue(ids.length < "the cat".length(), "merges apply: " + java.util.Arrays.toString(ids));
        assertEquals(510, tok.encode("the cat", true)[0], "BOS first with special tokens");
        for (String text : List.of("the cat sat", "Ünïcödé 🚀 text\nwith\ttabs", "  spaces  ", "x")) {
            assertEquals(text, tok.decode(tok.encode(text, false), false));
        }
        assertArrayEquals(new int[] {510, 511}, tok.encode("<|bos|><|eos|>", false), "specials in text are recognised");
    }
}
