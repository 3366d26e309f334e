package dev.scorch.engine.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.config.JsonErrors;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The fields of tokenizer_config.json that Scorch uses. Token fields (bos_token, eos_token) may be a string
 * or an AddedToken object ({@code {"__type": "AddedToken", "content": ...}}).
 *
 * @param addBosToken add_bos_token, null when absent
 * @param addEosToken add_eos_token, null when absent
 * @param chatTemplate the Jinja chat template (the "default" one when the file lists several), or null
 * @param addedTokens added_tokens_decoder entries, by id
 */
record TokenizerConfig(
        String source,
        Boolean addBosToken,
        Boolean addEosToken,
        String bosToken,
        String eosToken,
        String chatTemplate,
        List<AddedToken> addedTokens) {

    static final ObjectMapper JSON = new ObjectMapper();

    static TokenizerConfig empty() {
        return new TokenizerConfig("(none)", null, null, null, null, null, List.of());
    }

    static TokenizerConfig read(Path file) {
        JsonNode root;
        try {
            root = JSON.readTree(Files.readAllBytes(file));
        } catch (IOException e) {
            throw new TokenizerException(file + ": tokenizer config " + JsonErrors.describe(e));
        }
        return parse(root, file.toString());
    }

    /** tokenizer_config.json's bytes given with source's other files (none when null). */
    static TokenizerConfig parse(byte[] json, String source) {
        if (json == null) {
            return empty();
        }
        String where = source + " (tokenizer_config.json)";
        try {
            return parse(JSON.readTree(json), where);
        } catch (IOException e) {
            throw new TokenizerException(where + ": " + JsonErrors.describe(e));
        }
    }

    static TokenizerConfig parse(JsonNode root, String source) {
        if (root == null || !root.isObject()) {
            throw new TokenizerException(source + ": not a JSON object");
        }
        return new TokenizerConfig(
                source,
                optBool(root, "add_bos_token", source),
                optBool(root, "add_eos_token", source),
                tokenContent(root.get("bos_token"), source, "bos_token"),
                tokenContent(root.get("eos_token"), source, "eos_token"),
                chatTemplate(root.get("chat_template"), source),
                addedTokens(root.get("added_tokens_decoder"), source));
    }

    /** A token given as a string, an AddedToken object with "content", or null. */
    static String tokenContent(JsonNode n, String source, String field) {
        if (n == null || n.isNull()) {
            return null;
        }
        if (n.isTextual()) {
            return n.asText();
        }
        if (n.isObject() && n.path("content").isTextual()) {
            return n.get("content").asText();
        }
        throw new TokenizerException(source + ": field " + field + " must be a string or an object with \"content\"");
    }

    private static Boolean optBool(JsonNode root, String field, String source) {
        JsonNode n = root.get(field);
        if (n == null || n.isNull()) {
            return null;
        }
        if (!n.isBoolean()) {
            throw new TokenizerException(source + ": field " + field + " must be true or false, not " + n);
        }
        return n.asBoolean();
    }

    private static String chatTemplate(JsonNode n, String source) {
        if (n == null || n.isNull()) {
            return null;
        }
        if (n.isTextual()) {
            return n.asText();
        }
        if (n.isArray()) { // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
            for (JsonNode t : n) {
                if ("default".equals(t.path("name").asText())
                        && t.path("template").isTextual()) {
                    return t.get("template").asText();
                }
            }
        }
        throw new TokenizerException(
                source + ": field chat_template must be a string or a list with a \"default\" template");
    }

    private static List<AddedToken> addedTokens(JsonNode n, String source) {
        List<AddedToken> out = new ArrayList<>();
        if (n == null || n.isNull()) {
            return out;
        }
        if (!n.isObject()) {
            throw new TokenizerException(source + ": field added_tokens_decoder must be an object of id -> token");
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String where = "added_tokens_decoder[\"" + e.getKey() + "\"]";
            int id;
            try {
                id = Integer.parseInt(e.getKey());
            } catch (NumberFormatException ex) {
                id = -1;
            }
            if (id < 0) {
                throw new TokenizerException(
                        source + ": field " + where + ": key is not a token id (an integer from 0)");
            }
            out.add(addedToken(e.getValue(), id, source, where));
        }
        return out;
    }

    /** An AddedToken object (tokenizer.json "added_tokens" entries and added_tokens_decoder values). */
    static AddedToken addedToken(JsonNode t, int id, String source, String where) {
        if (!t.path("content").isTextual()) {
            throw new TokenizerException(source + ": field " + where + ".content is missing or not a string");
        }
        return new AddedToken(
                id,
                t.get("content").asText(),
                t.path("special").asBoolean(false),
                t.path("lstrip").asBoolean(false),
                t.path("rstrip").asBoolean(false),
                t.path("single_word").asBoolean(false),
                t.path("normalized").asBoolean(!t.path("special").asBoolean(false)));
    }
}
