package dev.scorch.jobs.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * An evaluation suite file (YAML, under conf/evals/): a name, a default tolerance, and tasks. Paths are relative
 * to the suite file. Every field is checked when the file is read; a problem names the file and the field.
 *
 * <pre>
 * name: demo
 * tolerance: 0.02            # the largest drop of any metric that --compare-to lets pass
 * tasks:
 *   - name: capitals
 *     kind: multiple_choice  # or perplexity, generate_match
 *     data: data/capitals.jsonl
 *     columns: {context: question, choices: options, gold: answer}
 *     tolerances: {acc_norm: 0.05}
 * </pre>
 *
 * @param hash SHA-256 of the file's bytes
 */
public record EvalSuite(String name, Path file, String hash, double tolerance, List<Task> tasks) {

    public enum Kind {
        MULTIPLE_CHOICE,
        PERPLEXITY,
        GENERATE_MATCH;

        public String id() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * One task.
     *
     * @param columns    the data's column for each role the kind reads (roles missing here keep their own name)
     * @param tolerances per-metric tolerances overriding the task's or the suite's
     * @param maxLength  perplexity: tokens per scored window
     * @param stride     perplexity: tokens a window moves on (the rest of it is context carried over)
     * @param maxNewTokens generate_match: the completion's length limit
     * @param stop       generate_match: stop strings
     */
    public record Task(
            String name,
            Kind kind,
            Path data,
            Map<String, String> columns,
            double tolerance,
            Map<String, Double> tolerances,
            int maxLength,
            int stride,
            int maxNewTokens,
            List<String> stop) {

        /** The data column that plays role (e.g. "context"). */
        public String column(String role) {
            return columns.getOrDefault(role, role);
        }

        public double tolerance(String metric) {
            return tolerances.getOrDefault(metric, tolerance);
        }
    }

    private static final Set<String> SUITE_FIELDS = Set.of("name", "tolerance", "tasks");
    private static final Set<String> TASK_FIELDS = Set.of(
            "name",
            "kind",
            "data",
            "columns",
            "tolerance",
            "tolerances",
            "max_length",
            "stride",
            "max_new_tokens",
            "stop");

    public static EvalSuite read(Path file) {
        byte[] bytes;
        JsonNode root;
        try {
            bytes = Files.readAllBytes(file);
            root = new ObjectMapper(new YAMLFactory()).readTree(bytes);
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": cannot read the suite: " + e.getMessage(), e);
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException(file + ": a suite is a mapping with name, tolerance and tasks");
        }
        unknownFields(file, "", root, SUITE_FIELDS);
        String name = text(file, "name", root.get("name"));
        double tolerance = number(file, "tolerance", root.get("tolerance"), 0.0);
        JsonNode tasks = root.get("tasks");
        if (tasks == null || !tasks.isArray() || tasks.isEmpty()) {
            throw new IllegalArgumentException(file + ": field 'tasks' must be a non-empty list");
        }
        Path base = file.toAbsolutePath().getParent();
        List<Task> out = new ArrayList<>();
        Set<String> names = new HashSet<>();
        for (int i = 0; i < tasks.size(); i++) {
            Task t = task(file, "tasks[" + i + "]", tasks.get(i), base, tolerance);
            if (!names.add(t.name())) {
                throw new IllegalArgumentException(file + ": tasks[" + i + "].name '" + t.name() + "' is used twice");
            }
            out.add(t);
        }
        return new EvalSuite(name, file, Hashes.sha256(bytes), tolerance, List.copyOf(out));
    }

    private static Task task(Path file, String at, JsonNode n, Path base, double suiteTolerance) {
        if (n == null || !n.isObject()) {
            throw new IllegalArgumentException(file + ": " + at + " must be a mapping");
        }
        unknownFields(file, at + ".", n, TASK_FIELDS);
        String name = text(file, at + ".name", n.get("name"));
        if (!name.matches("[A-Za-z0-9_.-]+")) {
            throw new IllegalArgumentException(
                    file + ": " + at + ".name '" + name + "' may hold only letters, digits, '_', '.', '-'");
        }
        String kindText = text(file, at + ".kind", n.get("kind"));
        Kind kind;
        try {
            kind = Kind.valueOf(kindText.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(file + ": " + at + ".kind '" + kindText
                    + "': expected multiple_choice, perplexity or generate_match");
        }
        Path data = base.resolve(text(file, at + ".data", n.get("data"))).normalize();
        if (!Files.exists(data)) {
            throw new IllegalArgumentException(file + ": " + at + ".data " + data + " does not exist");
        }
        Map<String, String> columns = new LinkedHashMap<>();
        if (n.has("columns")) {
            for (Iterator<Map.Entry<String, JsonNode>> it = n.get("columns").fields(); it.hasNext(); ) {
                var e = it.next();
                columns.put(e.getKey(), text(file, at + ".columns." + e.getKey(), e.getValue()));
            }
        }
        double tolerance = number(file, at + ".tolerance", n.get("tolerance"), suiteTolerance);
        Map<String, Double> tolerances = new LinkedHashMap<>();
        if (n.has("tolerances")) {
            for (Iterator<Map.Entry<String, JsonNode>> it = n.get("tolerances").fields(); it.hasNext(); ) {
                var e = it.next();
                tolerances.put(e.getKey(), number(file, at + ".tolerances." + e.getKey(), e.getValue(), 0.0));
            }
        }
        int maxLength = (int) number(file, at + ".max_length", n.get("max_length"), 2048);
        int stride = (int) number(file, at + ".stride", n.get("stride"), maxLength / 2);
        if (maxLength < 2 || stride < 1 || stride > maxLength) {
            throw new IllegalArgumentException(
                    file + ": " + at + ": need max_length >= 2 and 1 <= stride <= max_length");
        }
        int maxNewTokens = (int) number(file, at + ".max_new_tokens", n.get("max_new_tokens"), 32);
        if (maxNewTokens < 1) {
            throw new IllegalArgumentException(file + ": " + at + ".max_new_tokens must be >= 1");
        }
        List<String> stop = new ArrayList<>();
        if (n.has("stop")) {
            JsonNode s = n.get("stop");
            if (s.isTextual()) {
                stop.add(s.asText());
            } else if (s.isArray()) {
                s.forEach(v -> stop.add(text(file, at + ".stop", v)));
            } else {
                throw new IllegalArgumentException(file + ": " + at + ".stop must be a string or a list of strings");
            }
        }
        return new Task(
                name,
                kind,
                data,
                Map.copyOf(columns),
                tolerance,
                Map.copyOf(tolerances),
                maxLength,
                stride,
                maxNewTokens,
                List.copyOf(stop));
    }

    private static void unknownFields(Path file, String at, JsonNode n, Set<String> known) {
        for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!known.contains(f)) {
                throw new IllegalArgumentException(
                        file + ": unknown field '" + at + f + "' (known: " + new java.util.TreeSet<>(known) + ")");
            }
        }
    }

    private static String text(Path file, String field, JsonNode v) {
        if (v == null || !v.isTextual() || v.asText().isEmpty()) {
            throw new IllegalArgumentException(file + ": field '" + field + "' must be a non-empty string");
        }
        return v.asText();
    }

    private static double number(Path file, String field, JsonNode v, double dflt) {
        if (v == null) {
            return dflt;
        }
        if (!v.isNumber() || v.asDouble() < 0) {
            throw new IllegalArgumentException(file + ": field '" + field + "' must be a number >= 0");
        }
        return v.asDouble();
    }
}
