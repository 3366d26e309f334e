package dev.scorch.engine.tokenizer;

import dev.scorch.engine.runtime.CountingText;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A tiktoken BPE vocabulary (Kimi K2's tiktoken.model: one {@code base64-bytes rank} line per token, the rank
 * being the id) with special tokens from tokenizer_config.json's added_tokens_decoder.
 *
 * <p>Encoding follows Kimi's tokenization_kimi.py ({@code tiktoken.Encoding.encode(text,
 * allowed_special="all")}): special tokens are cut out of the text first (longest first), the rest is split by
 * the pattern ({@link #KIMI_PATTERN} unless told otherwise) and each piece's bytes are merged by rank.
 * Kimi reserves 256 + 2 special ids after the base vocabulary; those missing from added_tokens_decoder are
 * named {@code <|reserved_token_ID|>}, as in tokenization_kimi.py.
 *
 * <p>Not reproduced: tokenization_kimi.py cuts runs of more than 25,000 whitespace or non-whitespace
 * characters into separate chunks before encoding (a guard against a tiktoken crash), so such runs may
 * tokenize differently at the cut.
 *
 * <p>With {@code addSpecialTokens}, BOS/EOS are added only when tokenizer_config.json says add_bos_token /
 * add_eos_token true (Kimi's tokenizer adds nothing).
 */
public final class TiktokenTokenizer implements Tokenizer {
    /** Kimi K2's split pattern (tokenization_kimi.py {@code pat_str}), in its Rust-regex spelling. */
    public static final String KIMI_PATTERN = String.join(
            "|",
            "[\\p{Han}]+",
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "\\p{N}{1,3}",
            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
            "\\s*[\\r\\n]+",
            "\\s+(?!\\S)",
            "\\s+");

    /** Special ids Kimi reserves after the base vocabulary (num_reserved_special_tokens + 2). */
    static final int KIMI_RESERVED_SPECIAL = 256 + 2;

    private final String source;
    private final byte[][] idToBytes;
    private final boolean[] special;
    private final Map<String, Integer> specialIds;
    private final BytePairEncoder bpe;
    private final Pattern pattern;
    private final ThreadLocal<Matcher> matcher;
    private final AddedTokenMatcher specialMatcher;
    private final int[] prefix;
    private final int[] suffix;
    private final Integer bosId;
    private final List<Integer> eosIds;
    private final ChatTemplate chatTemplate;
    private volatile Map<String, Integer> byteLevelVocab; // built on first tokenId() call

    /**
     * Builds a tokenizer from the bytes of a tiktoken.model and (may be null) tokenizer_config.json, splitting
     * text with {@code pattern} (Rust/Oniguruma regex syntax, e.g. {@link #KIMI_PATTERN}).
     */
    public static TiktokenTokenizer fromBytes(
            String source, byte[] tiktokenModel, byte[] tokenizerConfigJson, String pattern) {
        return new TiktokenTokenizer(
                source, tiktokenModel, TokenizerConfig.parse(tokenizerConfigJson, source), pattern);
    }

    TiktokenTokenizer(String source, byte[] modelFile, TokenizerConfig config, String pattern) {
        this.source = source;
        // 1. Ranks, keyed by the token bytes as a Latin-1 string (one char per byte).
        Map<String, Integer> ranks = new HashMap<>();
        String text = new String(modelFile, StandardCharsets.UTF_8);
        int lineNo = 0;
        int maxRank = -1;
        int maxRankLine = 0;
        for (String line : text.split("\n")) {
            lineNo++;
            line = line.strip();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            byte[] bytes;
            int rank;
            try {
                if (f.length != 2) {
                    throw new IllegalArgumentException("expected 2 fields");
                }
                bytes = Base64.getDecoder().decode(f[0]);
                rank = Integer.parseInt(f[1]);
                if (rank < 0 || bytes.length == 0) {
                    throw new IllegalArgumentException("empty token or negative rank");
                }
            } catch (IllegalArgumentException e) {
                throw new TokenizerException(
                        source + ": line " + lineNo + " is not \"<base64 token> <rank>\" (" + e.getMessage() + ")");
            }
            if (ranks.put(new String(bytes, StandardCharsets.ISO_8859_1), rank) != null) {
                throw new TokenizerException(source + ": line " + lineNo + " repeats a token");
            }
            if (rank > maxRank) {
                maxRank = rank;
                maxRankLine = lineNo;
            }
        }
        if (ranks.isEmpty()) {
            throw new TokenizerException(source + ": no tokens");
        }

        // 2. Special tokens: added_tokens_decoder, plus Kimi's reserved names for the ids right after the ranks.
        Map<Integer, String> specials = new HashMap<>();
        for (AddedToken a : config.addedTokens()) {
            specials.put(a.id(), a.content());
        }
        int base = ranks.size();
        if (!specials.isEmpty()) {
            for (int id = base; id < base + KIMI_RESERVED_SPECIAL; id++) {
                specials.putIfAbsent(id, "<|reserved_token_" + id + "|>");
            }
        }
        // The id tables are sized by the largest id: bound it by the number of tokens the files hold.
        int bound = Tokenizers.idBound(ranks.size() + specials.size());
        if (maxRank >= bound) {
            throw new TokenizerException(source + ": line " + maxRankLine + " has rank " + maxRank
                    + ", but the file has only " + ranks.size() + " tokens (ranks must be below " + bound + ")");
        }
        int maxId = maxRank;
        for (int id : specials.keySet()) {
            if (id >= bound) {
                throw new TokenizerException(config.source() + ": field added_tokens_decoder[\"" + id
                        + "\"] is a token id past the " + (ranks.size() + specials.size())
                        + " tokens of the tokenizer (ids must be below " + bound + ")");
            }
            maxId = Math.max(maxId, id);
        }
        idToBytes = new byte[maxId + 1][];
        special = new boolean[maxId + 1];
        for (Map.Entry<String, Integer> e : ranks.entrySet()) {
            idToBytes[e.getValue()] = e.getKey().getBytes(StandardCharsets.ISO_8859_1);
        }
        specialIds = new HashMap<>();
        List<AddedToken> specialTokens = new ArrayList<>();
        for (Map.Entry<Integer, String> e : specials.entrySet()) {
            int id = e.getKey();
            if (idToBytes[id] != null) {
                throw new TokenizerException(source + ": special token id " + id + " (" + e.getValue()
                        + ") is also a rank in the model file");
            }
            idToBytes[id] = e.getValue().getBytes(StandardCharsets.UTF_8);
            special[id] = true;
            specialIds.put(e.getValue(), id);
            specialTokens.add(new AddedToken(id, e.getValue(), true, false, false, false, false));
        }
        for (int id = 0; id <= maxId; id++) {
            if (idToBytes[id] == null) {
                idToBytes[id] = new byte[0];
            }
        }
        specialMatcher = new AddedTokenMatcher(specialTokens);

        // 3. Merges: tiktoken merges two adjacent parts when their concatenation is a token, lowest rank
        // first. Every way of cutting a token into two tokens is such a merge, with the token's rank.
        int[] byteToId = new int[256];
        java.util.Arrays.fill(byteToId, -1);
        BytePairEncoder.PairMap merges = new BytePairEncoder.PairMap(ranks.size() * 3);
        for (Map.Entry<String, Integer> e : ranks.entrySet()) {
            String tok = e.getKey();
            if (tok.length() == 1) {
                byteToId[tok.charAt(0)] = e.getValue();
                continue;
            }
            for (int k = 1; k < tok.length(); k++) {
                Integer left = ranks.get(tok.substring(0, k));
                Integer right = ranks.get(tok.substring(k));
                if (left != null && right != null) {
                    merges.putIfAbsent(left, right, e.getValue(), e.getValue());
                }
            }
        }
        for (int b = 0; b < 256; b++) {
            if (byteToId[b] < 0) {
                throw new TokenizerException(source + ": byte 0x" + Integer.toHexString(b) + " has no token");
            }
        }
        bpe = new BytePairEncoder(byteToId, merges);
        this.pattern = Regexes.compile(pattern);
        this.matcher = ThreadLocal.withInitial(() -> this.pattern.matcher(""));

        // 4. BOS/EOS and the chat template.
        bosId = config.bosToken() == null ? null : specialIds.get(config.bosToken());
        eosIds = config.eosToken() != null && specialIds.containsKey(config.eosToken())
                ? List.of(specialIds.get(config.eosToken()))
                : List.of();
        prefix = addToken(config, config.addBosToken(), config.bosToken(), "bos_token");
        suffix = addToken(config, config.addEosToken(), config.eosToken(), "eos_token");
        chatTemplate = config.chatTemplate() == null
                ? null
                : new ChatTemplate(config.chatTemplate(), config.bosToken(), config.eosToken());
    }

    private int[] addToken(TokenizerConfig config, Boolean add, String token, String field) {
        if (!Boolean.TRUE.equals(add)) {
            return new int[0];
        }
        Integer id = token == null ? null : specialIds.get(token);
        if (id == null) {
            throw new TokenizerException(config.source() + ": field " + field
                    + " is missing or not a special token, but add_" + field + " is true");
        }
        return new int[] {id};
    }

    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
        IntList out = new IntList(text.length() / 3 + 4);
        if (addSpecialTokens) {
            out.addAll(prefix);
        }
        List<AddedTokenMatcher.Piece> pieces = new ArrayList<>();
        specialMatcher.split(text, 0, text.length(), pieces);
        Matcher m = matcher.get();
        try {
            for (AddedTokenMatcher.Piece p : pieces) {
                if (p.token() != null) {
                    out.add(p.token().id());
                    continue;
                }
                m.reset(Regexes.bounded(p.text(), p.start(), p.end()));
                m.region(p.start(), p.end());
                try {
                    while (m.find()) {
                        if (m.end() > m.start()) {
                            bpe.encode(p.text().substring(m.start(), m.end()), out);
                        }
                    }
                } catch (CountingText.TooManySteps | StackOverflowError e) {
                    throw Regexes.stopped(source + ": the split pattern", pattern, p.end() - p.start(), e);
                }
            }
        } finally {
            m.reset(""); // the thread-local matcher must not keep the text alive
        }
        if (addSpecialTokens) {
            out.addAll(suffix);
        }
        return out.toArray();
    }

    @Override
    public String decode(int[] ids, boolean skipSpecialTokens) {
        return Utf8.decodeTokens(ids, idToBytes, special, skipSpecialTokens);
    }

    @Override
    public int vocabSize() {
        return idToBytes.length;
    }

    @Override
    public Integer bosTokenId() {
        return bosId;
    }

    @Override
    public List<Integer> eosTokenIds() {
        return eosIds;
    }

    /** A special token's content, or a base token in GPT-2 byte-level form (as Kimi's get_vocab() lists it). */
    @Override
    public OptionalInt tokenId(String token) {
        Integer id = specialIds.get(token);
        if (id == null) {
            id = byteLevelVocab().get(token);
        }
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    private Map<String, Integer> byteLevelVocab() {
        Map<String, Integer> v = byteLevelVocab;
        if (v == null) {
            v = new HashMap<>(idToBytes.length * 2);
            for (int id = 0; id < idToBytes.length; id++) {
                if (!special[id] && idToBytes[id].length > 0) {
                    StringBuilder sb = new StringBuilder(idToBytes[id].length);
                    for (byte b : idToBytes[id]) {
                        sb.append(ByteLevel.BYTE_TO_CHAR[b & 0xFF]);
                    }
                    v.put(sb.toString(), id);
                }
            }
            byteLevelVocab = v;
        }
        return v;
    }

    @Override
    public byte[] tokenBytes(int id) {
        return id >= 0 && id < idToBytes.length ? idToBytes[id].clone() : new byte[0];
    }

    @Override
    public boolean isSpecial(int id) {
        return id >= 0 && id < special.length && special[id];
    }

    @Override
    public Optional<ChatTemplate> chatTemplate() {
        return Optional.ofNullable(chatTemplate);
    }

    @Override
    public String toString() {
        return "TiktokenTokenizer[" + source + ", " + vocabSize() + " ids]";
    }
}
