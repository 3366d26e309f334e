package dev.scorch.engine.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/** Typed, named access to the fields of one JSON config file; every error names the file and the field. */
final class JsonFields {
    private final String source;
    private final JsonNode root;

    JsonFields(String source, JsonNode root) {
        this.source = source;
        this.root = root;
    }

    static JsonFields read(Path file) {
        if (!Files.isRegularFile(file)) {
            throw new ConfigException(file + ": file is missing");
        }
        try {
            JsonNode root = new ObjectMapper().readTree(file.toFile());
            if (root == null || !root.isObject()) {
                throw new ConfigException(file + ": not a JSON object");
            }
            return new JsonFields(file.toString(), root);
        } catch (IOException e) {
            throw new ConfigException(file + ": " + JsonErrors.describe(e));
        }
    }

    JsonFields object(String field) {
        JsonNode n = root.get(field);
        if (n == null || n.isNull()) {
            return null;
        }
        if (!n.isObject()) {
            throw error(field, "must be an object");
        }
        return new JsonFields(source + " " + field, n);
    }

    boolean has(String field) {
        JsonNode n = root.get(field);
        return n != null && !n.isNull();
    }

    boolean present(String field) {
        return root.has(field);
    }

    ConfigException error(String field, String what) {
        return new ConfigException(source + ": field '" + field + "' " + what);
    }

    private JsonNode required(String field) {
        JsonNode n = root.get(field);
        if (n == null || n.isNull()) {
            throw error(field, "is required");
        }
        return n;
    }

    /** The required field's node, which must pass is ("must be " + what, and what it is, otherwise). */
    private JsonNode required(String field, Predicate<JsonNode> is, String what) {
        JsonNode n = required(field);
        if (!is.test(n)) {
            throw error(field, "must be " + what + ", got " + n);
        }
        return n;
    }

    int requiredInt(String field) {
        return required(field, n -> n.isIntegralNumber() && n.canConvertToInt(), "an integer")
                .asInt();
    }

    int optInt(String field, int dflt) {
        return has(field) ? requiredInt(field) : dflt;
    }

    Integer nullableInt(String field) {
        return has(field) ? requiredInt(field) : null;
    }

    /** A required integer in [min, max]. */
    int intIn(String field, int min, int max) {
        return checkInt(field, requiredInt(field), min, max);
    }

    /** An optional integer in [min, max] (dflt when absent or null). */
    int optIntIn(String field, int dflt, int min, int max) {
        return has(field) ? intIn(field, min, max) : dflt;
    }

    int checkInt(String field, int v, int min, int max) {
        if (v < min || v > max) {
            throw error(field, "must be an integer in [" + min + ", " + max + "], got " + v);
        }
        return v;
    }

    /** A required finite number in [min, max]; (min, max] where minOpen, [min, max) where maxOpen. */
    double doubleIn(String field, double min, boolean minOpen, double max, boolean maxOpen) {
        double v = requiredDouble(field);
        boolean low = minOpen ? v > min : v >= min;
        boolean high = maxOpen ? v < max : v <= max;
        if (!Double.isFinite(v) || !low || !high) {
            throw error(
                    field,
                    "must be a finite number in " + (minOpen ? "(" : "[") + min + ", " + max + (maxOpen ? ")" : "]")
                            + ", got " + v);
        }
        return v;
    }

    /** A required finite number in [min, max]. */
    double doubleIn(String field, double min, double max) {
        return doubleIn(field, min, false, max, false);
    }

    /** An optional {@link #doubleIn(String, double, boolean, double, boolean)} (dflt when absent or null). */
    double optDoubleIn(String field, double dflt, double min, boolean minOpen, double max, boolean maxOpen) {
        return has(field) ? doubleIn(field, min, minOpen, max, maxOpen) : dflt;
    }

    double requiredDouble(String field) {
        return required(field, JsonNode::isNumber, "a number").asDouble();
    }

    boolean optBool(String field, boolean dflt) {
        return has(field)
                ? required(field, JsonNode::isBoolean, "true or false").asBoolean()
                : dflt;
    }

    String optString(String field, String dflt) {
        return has(field) ? required(field, JsonNode::isTextual, "a string").asText() : dflt;
    }

    /** An int or a list of ints (eos_token_id takes both forms). */
    List<Integer> intOrIntList(String field) {
        List<Integer> out = new ArrayList<>();
        if (!has(field)) {
            return out;
        }
        JsonNode n = root.get(field);
        if (n.isIntegralNumber() && n.canConvertToInt()) {
            out.add(n.asInt());
        } else if (n.isArray()) {
            for (JsonNode x : n) {
                if (!x.isIntegralNumber() || !x.canConvertToInt()) {
                    throw error(field, "must be an integer or a list of integers");
                }
                out.add(x.asInt());
            }
        } else {
            throw error(field, "must be an integer or a list of integers");
        }
        return out;
    }

    /** A list of strings, every entry a JSON string (empty when absent or null). */
    List<String> stringList(String field) {
        List<String> out = new ArrayList<>();
        if (!has(field)) {
            return out;
        }
        JsonNode n = root.get(field);
        if (!n.isArray()) {
            throw error(field, "must be a list of strings, got " + n);
        }
        for (JsonNode x : n) {
            if (!x.isTextual()) {
                throw error(field, "must be a list of strings, got the entry " + x);
            }
            out.add(x.asText());
        }
        return out;
    }

    /** The names of the fields of this object, in file order. */
    List<String> fieldNames() {
        List<String> out = new ArrayList<>();
        root.fieldNames().forEachRemaining(out::add);
        return out;
    }

    /** A field's JSON text, for messages that quote what the file says. */
    String text(String field) {
        JsonNode n = root.get(field);
        return n == null ? "absent" : n.toString();
    }

    /** Where these fields come from (the file, and the objects inside it), for messages. */
    String source() {
        return source;
    }
}
