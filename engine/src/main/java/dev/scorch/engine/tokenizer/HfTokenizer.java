package dev.scorch.engine.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.runtime.CountingText;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.GZIPInputStream;

/**
 * A Hugging Face tokenizer.json with a byte-level BPE model (DeepSeek-V3, Llama 3, GPT-2, Qwen...).
 *
 * <p>Encoding follows the Rust tokenizers library step by step:
 *
 * <ol>
 *   <li>added tokens with normalized=false are cut out of the raw text (leftmost-longest, with their
 *       lstrip/rstrip/single_word flags);
 *   <li>the normalizer runs on the remaining pieces, then added tokens with normalized=true are cut out;
 *   <li>the pre-tokenizer splits each piece into words (Split with a regex, ByteLevel);
 *   <li>each word's UTF-8 bytes are merged by BPE rank;
 *   <li>post-processing adds BOS/EOS when {@code addSpecialTokens} is true.
 * </ol>
 *
 * <p>The BOS rule: when tokenizer_config.json has add_bos_token / add_eos_token (Llama-style tokenizers such
 * as DeepSeek-V3's LlamaTokenizerFast), Python's transformers replaces tokenizer.json's post-processor with
 * one that adds exactly those tokens; so does this class. Otherwise tokenizer.json's post_processor
 * (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence) decides.
 *
 * <p>Decoding concatenates each token's bytes (byte-level table; added tokens their own UTF-8) and decodes
 * them as UTF-8, as the ByteLevel decoder does. Ids outside the vocabulary decode to nothing.
 */
public final class HfTokenizer implements Tokenizer {
    private final String source;
    private final Map<String, Integer> tokenToId;
    private final String[] idToToken;
    private final byte[][] idToBytes;
    private final boolean[] special;
    private final BytePairEncoder bpe;
    private final boolean ignoreMerges;
    private final Normalizer normalizer; // null: none
    private final AddedTokenMatcher rawTokens; // normalized=false
    private final AddedTokenMatcher normalizedTokens; // normalized=true
    private final List<PreStep> preSteps;
    private final boolean prefixSpace; // ByteLevel add_prefix_space (first pre-tokenizer step)
    private final int[] postPrefix;
    private final int[] postSuffix;
    private final Integer bosId;
    private final List<Integer> eosIds;
    private final ChatTemplate chatTemplate;

    /** The bytes of a file, gunzipped when its name ends with .gz. */
    static byte[] readFile(Path file) {
        try (InputStream in = Files.newInputStream(file)) {
            return (file.toString().endsWith(".gz") ? new GZIPInputStream(in) : in).readAllBytes();
        } catch (IOException e) {
            throw new TokenizerException(file + ": cannot read: " + e, e);
        }
    }

    /**
     * Builds a tokenizer from the bytes of tokenizer.json and (may be null) tokenizer_config.json; {@code
     * source} names them in error messages.
     */
    public static HfTokenizer fromJson(String source, byte[] tokenizerJson, byte[] tokenizerConfigJson) {
        return build(source, tokenizerJson, TokenizerConfig.parse(tokenizerConfigJson, source));
    }

    static HfTokenizer build(String source, byte[] json, TokenizerConfig config) {
        JsonNode root;
        try {
            root = TokenizerConfig.JSON.readTree(json);
        } catch (IOException e) {
            throw new TokenizerException(source + ": " + dev.scorch.engine.config.JsonErrors.describe(e));
        }
        if (root == null || !root.isObject()) {
            throw new TokenizerException(source + ": not a JSON object");
        }
        try {
            return new HfTokenizer(source, root, config);
        } catch (IllegalArgumentException e) {
            throw new TokenizerException(source + ": " + e.getMessage(), e);
        }
    }

    private HfTokenizer(String source, JsonNode root, TokenizerConfig config) {
        this.source = source;
        JsonNode model = root.path("model");
        if (!model.isObject()) {
            throw fail("model", "is missing");
        }
        String type = model.path("type").asText("BPE");
        if (!type.equals("BPE")) {
            throw fail("model.type", "is " + type + "; only BPE is supported");
        }
        if (model.path("byte_fallback").asBoolean(false)) {
            throw fail("model.byte_fallback", "is true; only byte-level BPE is supported");
        }
        for (String f : List.of("continuing_subword_prefix", "end_of_word_suffix")) {
            if (!model.path(f).isNull()
                    && !model.path(f).isMissingNode()
                    && !model.path(f).asText().isEmpty()) {
                throw fail("model." + f, "is not supported");
            }
        }
        ignoreMerges = model.path("ignore_merges").asBoolean(false);

        // Vocabulary.
        JsonNode vocab = model.path("vocab");
        if (!vocab.isObject() || vocab.isEmpty()) {
            throw fail("model.vocab", "is missing or empty");
        }
        tokenToId = new HashMap<>(vocab.size() * 2);
        int maxId = -1;
        String maxIdField = null; // where the largest id comes from, for the error when it is out of bounds
        for (var it = vocab.fields(); it.hasNext(); ) {
            var e = it.next();
            String field = "model.vocab[\"" + e.getKey() + "\"]";
            int id = tokenId(e.getValue(), field);
            tokenToId.put(e.getKey(), id);
            if (id > maxId) {
                maxId = id;
                maxIdField = field;
            }
        }

        // Added tokens: tokenizer.json's list, then tokenizer_config.json's added_tokens_decoder for ids not seen.
        Map<Integer, AddedToken> added = new HashMap<>();
        JsonNode addedJson = root.path("added_tokens");
        Map<Integer, String> addedField = new HashMap<>();
        for (int i = 0; i < addedJson.size(); i++) {
            JsonNode t = addedJson.get(i);
            String field = "added_tokens[" + i + "]";
            AddedToken a = TokenizerConfig.addedToken(t, tokenId(t.path("id"), field + ".id"), source, field);
            added.put(a.id(), a);
            addedField.put(a.id(), field + ".id");
        }
        for (AddedToken a : config.addedTokens()) {
            if (added.putIfAbsent(a.id(), a) == null) {
                addedField.put(a.id(), "added_tokens_decoder[\"" + a.id() + "\"] of " + config.source());
            }
        }
        for (AddedToken a : added.values()) {
            tokenToId.put(a.content(), a.id());
            if (a.id() > maxId) {
                maxId = a.id();
                maxIdField = addedField.get(a.id());
            }
        }
        // The id tables are sized by the largest id: bound it by the number of tokens the files hold.
        int bound = Tokenizers.idBound(tokenToId.size());
        if (maxId >= bound) {
            throw fail(
                    maxIdField,
                    "is " + maxId + ", but the file has only " + tokenToId.size() + " tokens (ids must be below "
                            + bound + ")");
        }
        idToToken = new String[maxId + 1];
        for (var e : tokenToId.entrySet()) {
            if (idToToken[e.getValue()] == null || added.containsKey(e.getValue())) {
                idToToken[e.getValue()] = e.getKey();
            }
        }
        for (AddedToken a : added.values()) {
            idToToken[a.id()] = a.content();
        }
        idToBytes = new byte[maxId + 1][];
        special = new boolean[maxId + 1];
        for (int id = 0; id <= maxId; id++) {
            idToBytes[id] = idToToken[id] == null ? new byte[0] : ByteLevel.decodeToken(idToToken[id]);
        }
        List<AddedToken> raw = new ArrayList<>();
        List<AddedToken> norm = new ArrayList<>();
        for (AddedToken a : added.values()) {
            special[a.id()] = a.special();
            (a.normalized() ? norm : raw).add(a);
        }
        rawTokens = new AddedTokenMatcher(raw);
        normalizedTokens = new AddedTokenMatcher(norm);

        // Merges and the byte alphabet.
        bpe = new BytePairEncoder(byteIds(model), merges(model.path("merges")));

        normalizer = normalizer(root.path("normalizer"), "normalizer");
        List<PreStep> steps = new ArrayList<>();
        boolean[] prefix = new boolean[1];
        boolean byteLevel = preTokenizer(root.path("pre_tokenizer"), "pre_tokenizer", steps, prefix);
        preSteps = List.copyOf(steps);
        prefixSpace = prefix[0];
        if (!byteLevel && !isByteLevelDecoder(root.path("decoder"))) {
            throw fail("pre_tokenizer", "has no ByteLevel step (nor has decoder); only byte-level BPE is supported");
        }

        // Special ids and post-processing.
        bosId = config.bosToken() == null ? null : tokenToId.get(config.bosToken());
        List<Integer> eos = new ArrayList<>();
        if (config.eosToken() != null && tokenToId.containsKey(config.eosToken())) {
            eos.add(tokenToId.get(config.eosToken()));
        }
        eosIds = List.copyOf(eos);
        if (config.addBosToken() != null || config.addEosToken() != null) {
            postPrefix = configToken(config, Boolean.TRUE.equals(config.addBosToken()), config.bosToken(), "bos_token");
            postSuffix = configToken(config, Boolean.TRUE.equals(config.addEosToken()), config.eosToken(), "eos_token");
        } else {
            IntList pre = new IntList(2);
            IntList suf = new IntList(2);
            postProcessor(root.path("post_processor"), "post_processor", pre, suf);
            postPrefix = pre.toArray();
            postSuffix = suf.toArray();
        }
        chatTemplate = config.chatTemplate() == null
                ? null
                : new ChatTemplate(config.chatTemplate(), config.bosToken(), config.eosToken());
    }

    // ---------------------------------------------------------------------------------------------------------
    // Tokenizer

    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
        IntList out = new IntList(text.length() / 3 + 4);
        if (addSpecialTokens) {
            out.addAll(postPrefix);
        }
        List<AddedTokenMatcher.Piece> pieces = new ArrayList<>();
        rawTokens.split(text, 0, text.length(), pieces);
        List<AddedTokenMatcher.Piece> sub = new ArrayList<>();
        for (AddedTokenMatcher.Piece p : pieces) {
            if (p.token() != null) {
                out.add(p.token().id());
                continue;
            }
            String s = p.text();
            int start = p.start();
            int end = p.end();
            if (normalizer != null) {
                s = normalizer.apply(
                        s.substring(start, end), (long) NORMALIZED_GROWTH * (end - start) + NORMALIZED_SLACK);
                start = 0;
                end = s.length();
            }
            sub.clear();
            normalizedTokens.split(s, start, end, sub);
            for (AddedTokenMatcher.Piece q : sub) {
                if (q.token() != null) {
                    out.add(q.token().id());
                } else {
                    encodePlain(q.text(), q.start(), q.end(), out);
                }
            }
        }
        if (addSpecialTokens) {
            out.addAll(postSuffix);
        }
        return out.toArray();
    }

    /** Pre-tokenizes text[start, end) (no added tokens in it) and BPE-encodes each word. */
    private void encodePlain(String text, int start, int end, IntList out) {
        if (start >= end) {
            return;
        }
        if (prefixSpace && text.charAt(start) != ' ') {
            text = " " + text.substring(start, end);
            start = 0;
            end = text.length();
        }
        IntList bounds = new IntList(16);
        bounds.add(start);
        bounds.add(end);
        IntList next = new IntList(16);
        for (PreStep step : preSteps) {
            next.clear();
            for (int i = 0; i < bounds.size(); i += 2) {
                step.split(text, bounds.get(i), bounds.get(i + 1), next);
            }
            IntList t = bounds;
            bounds = next;
            next = t;
        }
        for (int i = 0; i < bounds.size(); i += 2) {
            String word = text.substring(bounds.get(i), bounds.get(i + 1));
            if (ignoreMerges) {
                Integer id = tokenToId.get(ByteLevel.encode(word));
                if (id != null) {
                    out.add(id);
                    continue;
                }
            }
            bpe.encode(word, out);
        }
    }

    @Override
    public String decode(int[] ids, boolean skipSpecialTokens) {
        return Utf8.decodeTokens(ids, idToBytes, special, skipSpecialTokens);
    }

    @Override
    public int vocabSize() {
        return idToToken.length;
    }

    @Override
    public Integer bosTokenId() {
        return bosId;
    }

    @Override
    public List<Integer> eosTokenIds() {
        return eosIds;
    }

    @Override
    public OptionalInt tokenId(String token) {
        Integer id = tokenToId.get(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    /** The vocabulary string of {@code id} (byte-level form), or null for ids outside the vocabulary. */
    public String token(int id) {
        return id >= 0 && id < idToToken.length ? idToToken[id] : null;
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
        return "HfTokenizer[" + source + ", " + vocabSize() + " ids]";
    }

    // ---------------------------------------------------------------------------------------------------------
    // Loading helpers

    private TokenizerException fail(String field, String what) {
        return new TokenizerException(source + ": field " + field + " " + what);
    }

    /** A token id field: a non-negative integer. */
    private int tokenId(JsonNode n, String field) {
        if (!n.isIntegralNumber() || !n.canConvertToInt() || n.asInt() < 0) {
            throw fail(field, (n.isMissingNode() ? "is missing" : "is " + n) + ", not a token id (an integer from 0)");
        }
        return n.asInt();
    }

    /** An id a post-processor adds: one of the vocabulary's. */
    private int vocabId(JsonNode n, String field) {
        int id = tokenId(n, field);
        if (id >= idToToken.length) {
            throw fail(field, "is " + id + ", outside the vocabulary of " + idToToken.length + " ids");
        }
        return id;
    }

    private int[] byteIds(JsonNode model) {
        Integer unk = model.path("unk_token").isTextual()
                ? tokenToId.get(model.get("unk_token").asText())
                : null;
        int[] ids = new int[256];
        for (int b = 0; b < 256; b++) {
            Integer id = tokenToId.get(String.valueOf(ByteLevel.BYTE_TO_CHAR[b]));
            ids[b] = id != null ? id : unk != null ? unk : -1;
        }
        return ids;
    }

    /** Merges as "left right" strings or [left, right] pairs; rank = position in the list. */
    private BytePairEncoder.PairMap merges(JsonNode merges) {
        if (!merges.isArray()) {
            throw fail("model.merges", "is missing or not a list");
        }
        BytePairEncoder.PairMap map = new BytePairEncoder.PairMap(merges.size());
        for (int rank = 0; rank < merges.size(); rank++) {
            JsonNode m = merges.get(rank);
            String left;
            String right;
            if (m.isTextual()) {
                String s = m.asText();
                int sp = s.indexOf(' ', 1);
                if (sp < 0 || s.indexOf(' ', sp + 1) >= 0) {
                    throw fail("model.merges[" + rank + "]", "is not \"left right\": " + Regexes.quote(s));
                }
                left = s.substring(0, sp);
                right = s.substring(sp + 1);
            } else if (m.isArray()
                    && m.size() == 2
                    && m.get(0).isTextual()
                    && m.get(1).isTextual()) {
                left = m.get(0).asText();
                right = m.get(1).asText();
            } else {
                throw fail("model.merges[" + rank + "]", "is neither \"left right\" nor [left, right]");
            }
            Integer a = tokenToId.get(left);
            Integer b = tokenToId.get(right);
            Integer merged = tokenToId.get(left + right);
            if (a == null || b == null || merged == null) {
                throw fail(
                        "model.merges[" + rank + "]", "uses a token missing from model.vocab: " + left + " " + right);
            }
            map.putIfAbsent(a, b, rank, merged);
        }
        return map;
    }

    /**
     * How long a normalized text may grow: NFKC alone can make a character 18, so 32 times the text plus a
     * little for Prepend leaves every real normalizer far from it, while a Replace of one character by a
     * megabyte is stopped before it allocates.
     */
    static final int NORMALIZED_GROWTH = 32;

    static final int NORMALIZED_SLACK = 4096;

    /** One normalizer: the normalized text, or a TokenizerException when it would pass {@code maxChars}. */
    interface Normalizer {
        String apply(String s, long maxChars);
    }

    private Normalizer normalizer(JsonNode n, String field) {
        if (n.isMissingNode() || n.isNull()) {
            return null;
        }
        String type = n.path("type").asText();
        switch (type) {
            case "Sequence": {
                List<Normalizer> parts = new ArrayList<>();
                JsonNode list = n.path("normalizers");
                for (int i = 0; i < list.size(); i++) {
                    Normalizer p = normalizer(list.get(i), field + ".normalizers[" + i + "]");
                    if (p != null) {
                        parts.add(p);
                    }
                }
                if (parts.isEmpty()) {
                    return null;
                }
                return (s, max) -> {
                    for (Normalizer p : parts) {
                        s = p.apply(s, max);
                    }
                    return s;
                };
            }
            case "NFC":
                return bounded(field, s -> java.text.Normalizer.normalize(s, java.text.Normalizer.Form.NFC));
            case "NFD":
                return bounded(field, s -> java.text.Normalizer.normalize(s, java.text.Normalizer.Form.NFD));
            case "NFKC":
                return bounded(field, s -> java.text.Normalizer.normalize(s, java.text.Normalizer.Form.NFKC));
            case "NFKD":
                return bounded(field, s -> java.text.Normalizer.normalize(s, java.text.Normalizer.Form.NFKD));
            case "Lowercase":
                return bounded(field, s -> s.toLowerCase(Locale.ROOT));
            case "Prepend": {
                String pre = n.path("prepend").asText();
                return (s, max) -> {
                    if (s.isEmpty()) {
                        return s;
                    }
                    checkGrowth(field, s.length(), (long) pre.length() + s.length(), max);
                    return pre + s;
                };
            }
            case "Replace": {
                String content = n.path("content").asText();
                JsonNode pat = n.path("pattern");
                if (pat.path("String").isTextual()) {
                    String lit = pat.get("String").asText();
                    if (lit.isEmpty()) {
                        throw fail(field + ".pattern.String", "is empty");
                    }
                    return (s, max) -> {
                        if (content.length() > lit.length()) {
                            long count = 0;
                            for (int at = s.indexOf(lit); at >= 0; at = s.indexOf(lit, at + lit.length())) {
                                count++;
                            }
                            checkGrowth(field, s.length(), s.length() + count * (content.length() - lit.length()), max);
                        }
                        return s.replace(lit, content);
                    };
                }
                if (pat.path("Regex").isTextual()) {
                    Pattern p = Regexes.compile(pat.get("Regex").asText());
                    String where = source + ": field " + field + ".pattern";
                    return (s, max) -> replaceAll(s, p, content, max, where, field);
                }
                throw fail(field + ".pattern", "must be {\"String\": ...} or {\"Regex\": ...}");
            }
            default:
                throw fail(field + ".type", "is " + Regexes.quote(type) + ", which is not supported");
        }
    }

    /** A normalizer whose output is at most a small multiple of its input, checked after it runs. */
    private Normalizer bounded(String field, UnaryOperator<String> f) {
        return (s, max) -> {
            String out = f.apply(s);
            checkGrowth(field, s.length(), out.length(), max);
            return out;
        };
    }

    private void checkGrowth(String field, int in, long out, long max) {
        if (out > max) {
            throw fail(field, "would make a text of " + in + " characters longer than the " + max + " it may grow to");
        }
    }

    /** Matcher.replaceAll with a literal replacement, stopped before the result passes {@code max}. */
    private String replaceAll(String s, Pattern p, String content, long max, String where, String field) {
        Matcher m = p.matcher(Regexes.bounded(s, 0, s.length()));
        StringBuilder sb = null;
        int last = 0;
        try {
            while (m.find()) {
                if (sb == null) {
                    sb = new StringBuilder(s.length() + 16);
                }
                sb.append(s, last, m.start()).append(content);
                last = m.end();
                checkGrowth(field, s.length(), (long) sb.length() + s.length() - last, max);
            }
        } catch (CountingText.TooManySteps | StackOverflowError e) {
            throw Regexes.stopped(where, p, s.length(), e);
        }
        return sb == null ? s : sb.append(s, last, s.length()).toString();
    }

    /** Adds the steps of a pre-tokenizer; returns whether it contains a ByteLevel step. */
    private boolean preTokenizer(JsonNode n, String field, List<PreStep> steps, boolean[] prefixSpace) {
        if (n.isMissingNode() || n.isNull()) {
            return false;
        }
        String type = n.path("type").asText();
        switch (type) {
            case "Sequence": {
                boolean byteLevel = false;
                JsonNode list = n.path("pretokenizers");
                for (int i = 0; i < list.size(); i++) {
                    byteLevel |= preTokenizer(list.get(i), field + ".pretokenizers[" + i + "]", steps, prefixSpace);
                }
                return byteLevel;
            }
            case "Split": {
                JsonNode pat = n.path("pattern");
                Pattern p;
                if (pat.path("Regex").isTextual()) {
                    p = Regexes.compile(pat.get("Regex").asText());
                } else if (pat.path("String").isTextual()) {
                    p = Pattern.compile(Pattern.quote(pat.get("String").asText()));
                } else {
                    throw fail(field + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
                }
                Behavior b = Behavior.parse(n.path("behavior").asText(), () -> fail(field + ".behavior", "is unknown"));
                steps.add(new SplitStep(
                        p, b, n.path("invert").asBoolean(false), source + ": field " + field + ".pattern"));
                return false;
            }
            case "ByteLevel": {
                if (n.path("add_prefix_space").asBoolean(false)) {
                    if (!steps.isEmpty()) {
                        throw fail(field + ".add_prefix_space", "is only supported on the first pre-tokenizer");
                    }
                    prefixSpace[0] = true;
                }
                if (n.path("use_regex").asBoolean(true)) {
                    steps.add(new SplitStep(
                            Regexes.compile(Regexes.GPT2), Behavior.ISOLATED, false, source + ": field " + field));
                }
                return true; // the byte mapping itself happens in BPE, which works on UTF-8 bytes
            }
            case "Digits": {
                Pattern p = Regexes.compile(n.path("individual_digits").asBoolean(false) ? "\\p{N}" : "\\p{N}+");
                steps.add(new SplitStep(p, Behavior.ISOLATED, false, source + ": field " + field));
                return false;
            }
            default:
                throw fail(field + ".type", "is " + Regexes.quote(type) + ", which is not supported");
        }
    }

    private static boolean isByteLevelDecoder(JsonNode n) {
        if ("ByteLevel".equals(n.path("type").asText())) {
            return true;
        }
        for (JsonNode d : n.path("decoders")) {
            if (isByteLevelDecoder(d)) {
                return true;
            }
        }
        return false;
    }

    /** Collects the ids a post-processor puts before and after a single sequence. */
    private void postProcessor(JsonNode n, String field, IntList prefix, IntList suffix) {
        if (n.isMissingNode() || n.isNull()) {
            return;
        }
        String type = n.path("type").asText();
        switch (type) {
            case "ByteLevel":
                return;
            case "Sequence": {
                JsonNode list = n.path("processors");
                for (int i = 0; i < list.size(); i++) {
                    IntList pre = new IntList(2);
                    IntList suf = new IntList(2);
                    postProcessor(list.get(i), field + ".processors[" + i + "]", pre, suf);
                    // Each processor wraps the result of the previous ones.
                    int[] old = prefix.toArray();
                    prefix.clear();
                    prefix.addAll(pre.toArray());
                    prefix.addAll(old);
                    suffix.addAll(suf.toArray());
                }
                return;
            }
            case "TemplateProcessing": {
                boolean seenSequence = false;
                JsonNode single = n.path("single");
                for (int i = 0; i < single.size(); i++) {
                    JsonNode piece = single.get(i);
                    if (piece.has("Sequence")) {
                        seenSequence = true;
                    } else if (piece.has("SpecialToken")) {
                        String name = piece.get("SpecialToken").path("id").asText();
                        JsonNode ids = n.path("special_tokens").path(name).path("ids");
                        if (!ids.isArray() || ids.isEmpty()) {
                            throw fail(field + ".special_tokens[\"" + name + "\"].ids", "is missing");
                        }
                        for (int k = 0; k < ids.size(); k++) {
                            String where = field + ".special_tokens[\"" + name + "\"].ids[" + k + "]";
                            (seenSequence ? suffix : prefix).add(vocabId(ids.get(k), where));
                        }
                    } else {
                        throw fail(field + ".single[" + i + "]", "is neither Sequence nor SpecialToken");
                    }
                }
                return;
            }
            case "RobertaProcessing":
            case "BertProcessing":
                prefix.add(vocabId(n.path("cls").path(1), field + ".cls[1]"));
                suffix.add(vocabId(n.path("sep").path(1), field + ".sep[1]"));
                return;
            default:
                throw fail(field + ".type", "is " + Regexes.quote(type) + ", which is not supported");
        }
    }

    private int[] configToken(TokenizerConfig config, boolean add, String token, String field) {
        if (!add) {
            return new int[0];
        }
        Integer id = token == null ? null : tokenToId.get(token);
        if (id == null) {
            throw new TokenizerException(config.source() + ": field " + field
                    + " is missing or not in the vocabulary, but add_" + field + " is true");
        }
        return new int[] {id};
    }

    // ---------------------------------------------------------------------------------------------------------
    // Pre-tokenizer steps

    /** One pre-tokenizer step: appends the (start, end) bounds of the pieces of text[start, end). */
    interface PreStep {
        void split(String text, int start, int end, IntList out);
    }

    /** What Split does with the matches (Hugging Face's SplitDelimiterBehavior). */
    enum Behavior {
        REMOVED,
        ISOLATED,
        MERGED_WITH_PREVIOUS,
        MERGED_WITH_NEXT,
        CONTIGUOUS;

        static Behavior parse(String s, java.util.function.Supplier<TokenizerException> err) {
            switch (s) {
                case "Removed":
                    return REMOVED;
                case "Isolated":
                    return ISOLATED;
                case "MergedWithPrevious":
                    return MERGED_WITH_PREVIOUS;
                case "MergedWithNext":
                    return MERGED_WITH_NEXT;
                case "Contiguous":
                    return CONTIGUOUS;
                default:
                    throw err.get();
            }
        }
    }

    /** Split: cuts a piece at the matches of a regex (within the piece: lookarounds do not see past it). */
    static final class SplitStep implements PreStep {
        private final Pattern pattern;
        private final Behavior behavior;
        private final boolean invert;
        private final String where; // the file and field, for errors
        private final ThreadLocal<Matcher> matcher;

        SplitStep(Pattern pattern, Behavior behavior, boolean invert, String where) {
            this.pattern = pattern;
            this.behavior = behavior;
            this.invert = invert;
            this.where = where;
            this.matcher = ThreadLocal.withInitial(() -> pattern.matcher(""));
        }

        /**
         * @throws TokenizerException for this text when the file's regex backtracks without bound or
         *     overflows the stack on it (see {@link Regexes#bounded})
         */
        @Override
        public void split(String text, int start, int end, IntList out) {
            Matcher m = matcher.get().reset(Regexes.bounded(text, start, end));
            try {
                m.region(start, end);
                split(m, start, end, out);
            } catch (CountingText.TooManySteps | StackOverflowError e) {
                throw Regexes.stopped(where, pattern, end - start, e);
            } finally {
                m.reset(""); // the thread-local matcher must not keep the text alive
            }
        }

        private void split(Matcher m, int start, int end, IntList out) {
            if (behavior == Behavior.ISOLATED) { // the common case: every match and every gap is a piece
                int prev = start;
                while (m.find()) {
                    if (m.end() == m.start()) {
                        continue;
                    }
                    if (prev < m.start()) {
                        out.add(prev);
                        out.add(m.start());
                    }
                    out.add(m.start());
                    out.add(m.end());
                    prev = m.end();
                }
                if (prev < end) {
                    out.add(prev);
                    out.add(end);
                }
                return;
            }
            // General case: (start, end, isMatch) triples, then the behaviour, as tokenizers' split() does.
            List<int[]> parts = new ArrayList<>();
            int prev = start;
            while (m.find()) {
                if (m.end() == m.start()) {
                    continue;
                }
                if (prev < m.start()) {
                    parts.add(new int[] {prev, m.start(), invert ? 1 : 0});
                }
                parts.add(new int[] {m.start(), m.end(), invert ? 0 : 1});
                prev = m.end();
            }
            if (prev < end) {
                parts.add(new int[] {prev, end, invert ? 1 : 0});
            }
            List<int[]> res = new ArrayList<>();
            switch (behavior) {
                case REMOVED:
                    for (int[] p : parts) {
                        if (p[2] == 0) {
                            res.add(p);
                        }
                    }
                    break;
                case MERGED_WITH_PREVIOUS: {
                    boolean prevMatch = false;
                    for (int[] p : parts) {
                        if (p[2] == 1 && !prevMatch && !res.isEmpty()) {
                            res.get(res.size() - 1)[1] = p[1];
                        } else {
                            res.add(p.clone());
                        }
                        prevMatch = p[2] == 1;
                    }
                    break;
                }
                case MERGED_WITH_NEXT: {
                    boolean prevMatch = false;
                    for (int i = parts.size() - 1; i >= 0; i--) {
                        int[] p = parts.get(i);
                        if (p[2] == 1 && !prevMatch && !res.isEmpty()) {
                            res.get(res.size() - 1)[0] = p[0];
                        } else {
                            res.add(p.clone());
                        }
                        prevMatch = p[2] == 1;
                    }
                    java.util.Collections.reverse(res);
                    break;
                }
                case CONTIGUOUS: {
                    boolean prevMatch = false;
                    for (int[] p : parts) {
                        if (p[2] == (prevMatch ? 1 : 0) && !res.isEmpty()) {
                            res.get(res.size() - 1)[1] = p[1];
                        } else {
                            res.add(p.clone());
                        }
                        prevMatch = p[2] == 1;
                    }
                    break;
                }
                default:
                    res = parts;
            }
            for (int[] p : res) {
                if (p[0] < p[1]) {
                    out.add(p[0]);
                    out.add(p[1]);
                }
            }
        }

        @Override
        public String toString() {
            return "Split[" + pattern + ", " + behavior + (invert ? ", invert" : "") + "]";
        }
    }
}
