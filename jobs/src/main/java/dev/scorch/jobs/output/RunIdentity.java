package dev.scorch.jobs.output;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What makes a run's rows what they are, recorded in its partial folder's marker when it starts: the model (its name and
 * content hash, every file's CRC32C), the input ({@link InputFingerprint}) and every option that changes a result
 * (sampling, top-k, columns read, precision; not threads, batching, partitions or slices, which change no bits). A
 * --resume computes it again and continues only when nothing differs.
 *
 * @param model     the model's label, name@hash, as result rows carry it
 * @param modelHash the model's full content hash
 * @param input     the input as given
 * @param options   the options that change results, by their option names, as strings
 */
public record RunIdentity(
        String model, String modelHash, String input, InputFingerprint inputFiles, Map<String, String> options) {
    public RunIdentity {
        options = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(options));
    }

    /** The differences from the identity a run started with, a phrase each, naming what changed (empty: the same run). */
    public List<String> changesFrom(RunIdentity started) {
        List<String> changes = new ArrayList<>();
        if (!modelHash.equals(started.modelHash)) {
            changes.add("the model is " + model + ", the run started with " + started.model);
        }
        for (String c : inputFiles.changesFrom(started.inputFiles)) {
            changes.add("the input: " + c);
        }
        java.util.Set<String> names = new java.util.TreeSet<>(options.keySet());
        names.addAll(started.options.keySet());
        for (String n : names) {
            String now = options.get(n);
            String then = started.options.get(n);
            if (!Objects.equals(now, then)) {
                changes.add("--" + n + " is " + (now == null ? "not given" : now) + ", the run started with "
                        + (then == null ? "none" : then));
            }
        }
        return changes;
    }

    public ObjectNode toJson(ObjectMapper json) {
        ObjectNode o = json.createObjectNode()
                .put("model", model)
                .put("model_hash", modelHash)
                .put("input", input);
        o.set("input_files", inputFiles.toJson(json));
        ObjectNode opts = o.putObject("options");
        options.forEach(opts::put);
        return o;
    }

    /** The identity a marker recorded, or null when it has none (written by a Scorch before run identities). */
    public static RunIdentity fromJson(JsonNode n) {
        if (n == null || !n.isObject() || !n.hasNonNull("model_hash") || !n.has("input_files")) {
            return null;
        }
        Map<String, String> opts = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = n.path("options").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            opts.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
        }
        return new RunIdentity(
                n.path("model").asText(),
                n.path("model_hash").asText(),
                n.path("input").asText(),
                InputFingerprint.fromJson(n.path("input_files")),
                opts);
    }
}
