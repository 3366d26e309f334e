package dev.scorch.engine.tokenizer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Finds added tokens in text the way Hugging Face's AddedVocabulary does: leftmost-longest matches (its
 * Aho-Corasick automaton), skipping single_word tokens glued to word characters, and widening a match over
 * the whitespace before it (lstrip) or after it (rstrip).
 */
final class AddedTokenMatcher {
    /** A piece of text: either plain text (token == null) or an added token. */
    record Piece(String text, int start, int end, AddedToken token) {}

    private static final class Node {
        final Map<Character, Node> next = new HashMap<>(4);
        AddedToken token;
    }

    private final Node root = new Node();
    private final boolean[] firstChar = new boolean[Character.MAX_VALUE + 1];
    private final boolean empty;

    AddedTokenMatcher(List<AddedToken> tokens) {
        for (AddedToken t : tokens) {
            if (t.content().isEmpty()) {
                continue;
            }
            Node node = root;
            for (int i = 0; i < t.content().length(); i++) {
                node = node.next.computeIfAbsent(t.content().charAt(i), k -> new Node());
            }
            if (node.token == null) {
                node.token = t;
            }
            firstChar[t.content().charAt(0)] = true;
        }
        empty = root.next.isEmpty();
    }

    /** Splits text[start, end) into plain pieces and added-token pieces, in order; no piece is empty. */
    void split(String text, int start, int end, List<Piece> out) {
        if (empty) {
            out.add(new Piece(text, start, end, null));
            return;
        }
        int plainStart = start; // start of the pending plain text (and end of the previous match)
        int i = start;
        while (i < end) {
            if (!firstChar[text.charAt(i)]) {
                i++;
                continue;
            }
            // Longest token starting at i.
            Node node = root;
            AddedToken found = null;
            int foundEnd = -1;
            for (int j = i; j < end; j++) {
                node = node.next.get(text.charAt(j));
                if (node == null) {
                    break;
                }
                if (node.token != null) {
                    found = node.token;
                    foundEnd = j + 1;
                }
            }
            if (found == null) {
                i++;
                continue;
            }
            if (found.singleWord() && !isSingleWord(text, start, end, i, foundEnd)) {
                i = foundEnd; // HF discards the match and searches on after it (non-overlapping matches)
                continue;
            }
            int mStart = i;
            int mEnd = foundEnd;
            if (found.lstrip()) {
                while (mStart > plainStart && isWhiteSpace(text.charAt(mStart - 1))) {
                    mStart--;
                }
            }
            if (found.rstrip()) {
                while (mEnd < end && isWhiteSpace(text.charAt(mEnd))) {
                    mEnd++;
                }
            }
            if (plainStart < mStart) {
                out.add(new Piece(text, plainStart, mStart, null));
            }
            out.add(new Piece(text, mStart, mEnd, found));
            plainStart = mEnd;
            i = mEnd;
        }
        if (plainStart < end) {
            out.add(new Piece(text, plainStart, end, null));
        }
    }

    /** A single_word match must not touch word characters on either side (within the piece). */
    private static boolean isSingleWord(String text, int start, int end, int mStart, int mEnd) {
        boolean before = mStart == start || !isWordChar(text.codePointBefore(mStart));
        boolean after = mEnd == end || !isWordChar(text.codePointAt(mEnd));
        return before && after;
    }

    /** Unicode \w (regex-syntax's is_word_character). */
    static boolean isWordChar(int cp) {
        if (Character.isAlphabetic(cp) || Character.isDigit(cp)) {
            return true;
        }
        int t = Character.getType(cp);
        return t == Character.NON_SPACING_MARK
                || t == Character.ENCLOSING_MARK
                || t == Character.COMBINING_SPACING_MARK
                || t == Character.CONNECTOR_PUNCTUATION
                || cp == 0x200C
                || cp == 0x200D;
    }

    /** Unicode White_Space (Rust's char::is_whitespace); all such characters are in the BMP. */
    static boolean isWhiteSpace(char c) {
        return (c >= 0x09 && c <= 0x0D)
                || c == ' '
                || c == 0x85
                || c == 0xA0
                || c == 0x1680
                || (c >= 0x2000 && c <= 0x200A)
                || c == 0x2028
                || c == 0x2029
                || c == 0x202F
                || c == 0x205F
                || c == 0x3000;
    }
}
