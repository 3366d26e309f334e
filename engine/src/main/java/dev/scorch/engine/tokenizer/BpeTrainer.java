package dev.scorch.engine.tokenizer;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A small byte-level BPE trainer, for the demo model's tokenizer: it learns merges from a corpus the way
 * BPE is trained (repeatedly merge the most frequent adjacent pair; ties to the smaller pair, so the result
 * is deterministic) and writes a Hugging Face tokenizer.json + tokenizer_config.json that {@link HfTokenizer}
 * (and Hugging Face's own libraries) load.
 */
public final class BpeTrainer {
    /** GPT-2 style pre-tokenisation: words with their leading space, numbers, punctuation runs, whitespace. */
    static final String SPLIT = " ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    private BpeTrainer() {}

    /** Learns up to {@code merges} merges; returns them in order ("a b" in byte-level characters). */
    public static List<String> train(String corpus, int merges) {
        Map<String, Integer> wordFreq = new TreeMap<>();
        Matcher m = Pattern.compile(SPLIT, Pattern.UNICODE_CHARACTER_CLASS).matcher(corpus);
        while (m.find()) {
            wordFreq.merge(ByteLevel.encode(m.group()), 1, Integer::sum);
        }
        List<List<String>> words = new ArrayList<>();
        List<Integer> freq = new ArrayList<>();
        wordFreq.forEach((w, f) -> {
            List<String> symbols = new ArrayList<>();
            w.codePoints().forEach(cp -> symbols.add(new String(Character.toChars(cp))));
            words.add(symbols);
            freq.add(f);
        });
        List<String> out = new ArrayList<>();
        for (int step = 0; step < merges; step++) {
            Map<String, Integer> pairs = new HashMap<>();
            for (int w = 0; w < words.size(); w++) {
                List<String> s = words.get(w);
                for (int i = 0; i + 1 < s.size(); i++) {
                    pairs.merge(s.get(i) + " " + s.get(i + 1), freq.get(w), Integer::sum);
                }
            }
            String best = null;
            for (Map.Entry<String, Integer> e : pairs.entrySet()) {
                if (best == null
                        || e.getValue() > pairs.get(best)
                        || (e.getValue().equals(pairs.get(best)) && e.getKey().compareTo(best) < 0)) {
                    best = e.getKey();
                }
            }
            if (best == null || pairs.get(best) < 2) {
                break;
            }
            out.add(best);
            String[] ab = best.split(" ", 2);
            for (List<String> s : words) {
                for (int i = 0; i + 1 < s.size(); i++) {
                    if (s.get(i).equals(ab[0]) && s.get(i + 1).equals(ab[1])) {
                        s.set(i, ab[0] + ab[1]);
                        s.remove(i + 1);
                    }
                }
            }
        }
        return out;
    }

    /**
     * Writes tokenizer.json (ids 0-255 the bytes, then one id per merge, then BOS and EOS at the given ids) and
     * tokenizer_config.json (add_bos_token true, a simple chat template) into {@code dir}.
     */
    public static void write(Path dir, List<String> merges, int bosId, int eosId, String bos, String eos)
            throws IOException {
        ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        Map<String, Integer> vocab = new LinkedHashMap<>();
        for (int b = 0; b < 256; b++) {
            vocab.put(String.valueOf(ByteLevel.BYTE_TO_CHAR[b]), b);
        }
        for (String merge : merges) {
            vocab.putIfAbsent(merge.replace(" ", ""), vocab.size());
        }
        if (vocab.size() > Math.min(bosId, eosId)) {
            throw new IllegalArgumentException(
                    vocab.size() + " tokens collide with the special ids " + bosId + ", " + eosId);
        }
        ObjectNode root = json.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        added.add(special(json, bosId, bos));
        added.add(special(json, eosId, eos));
        root.putNull("normalizer");
        ObjectNode pre = root.putObject("pre_tokenizer");
        pre.put("type", "Sequence");
        ArrayNode steps = pre.putArray("pretokenizers");
        ObjectNode split = steps.addObject();
        split.put("type", "Split");
        split.putObject("pattern").put("Regex", SPLIT);
        split.put("behavior", "Isolated");
        split.put("invert", false);
        ObjectNode byteLevel = steps.addObject();
        byteLevel.put("type", "ByteLevel");
        byteLevel.put("add_prefix_space", false);
        byteLevel.put("trim_offsets", true);
        byteLevel.put("use_regex", false);
        root.putNull("post_processor");
        ObjectNode decoder = root.putObject("decoder");
        decoder.put("type", "ByteLevel");
        decoder.put("add_prefix_space", true);
        decoder.put("trim_offsets", true);
        decoder.put("use_regex", true);
        ObjectNode model = root.putObject("model");
        model.put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.put("fuse_unk", false);
        model.put("byte_fallback", false);
        model.put("ignore_merges", false);
        ObjectNode v = model.putObject("vocab");
        vocab.forEach(v::put);
        ArrayNode m = model.putArray("merges");
        merges.forEach(m::add);
        json.writeValue(dir.resolve("tokenizer.json").toFile(), root);

        ObjectNode cfg = json.createObjectNode();
        cfg.put("add_bos_token", true);
        cfg.put("add_eos_token", false);
        cfg.put("bos_token", bos);
        cfg.put("eos_token", eos);
        cfg.put("clean_up_tokenization_spaces", false);
        cfg.put("model_max_length", 131072);
        cfg.put("tokenizer_class", "PreTrainedTokenizerFast");
        cfg.put(
                "chat_template",
                "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>: {{ m['content'] }}\n{% endfor %}"
                        + "{% if add_generation_prompt %}<assistant>: {% endif %}");
        json.writeValue(dir.resolve("tokenizer_config.json").toFile(), cfg);
    }

    private static ObjectNode special(ObjectMapper json, int id, String content) {
        ObjectNode t = json.createObjectNode().put("id", id).put("content", content);
        for (String flag : new String[] {"single_word", "lstrip", "rstrip", "normalized"}) {
            t.put(flag, false);
        }
        return t.put("special", true);
    }
}
