package dev.scorch.engine.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

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
      throw new ConfigException(file + ": not valid JSON: " + e.getMessage(), e);
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

  int requiredInt(String field) {
    JsonNode n = required(field);
    if (!n.isIntegralNumber() || !n.canConvertToInt()) {
      throw error(field, "must be an integer, got " + n);
    }
    return n.asInt();
  }

  int positiveInt(String field) {
    int v = requiredInt(field);
    if (v <= 0) {
      throw error(field, "must be positive, got " + v);
    }
    return v;
  }

  int optInt(String field, int dflt) {
    return has(field) ? requiredInt(field) : dflt;
  }

  Integer nullableInt(String field) {
    return has(field) ? requiredInt(field) : null;
  }

  double requiredDouble(String field) {
    JsonNode n = required(field);
    if (!n.isNumber()) {
      throw error(field, "must be a number, got " + n);
    }
    return n.asDouble();
  }

  double optDouble(String field, double dflt) {
    return has(field) ? requiredDouble(field) : dflt;
  }

  Double nullableDouble(String field) {
    return has(field) ? requiredDouble(field) : null;
  }

  boolean optBool(String field, boolean dflt) {
    if (!has(field)) {
      return dflt;
    }
    JsonNode n = root.get(field);
    if (!n.isBoolean()) {
      throw error(field, "must be true or false, got " + n);
    }
    return n.asBoolean();
  }

  String optString(String field, String dflt) {
    if (!has(field)) {
      return dflt;
    }
    JsonNode n = root.get(field);
    if (!n.isTextual()) {
      throw error(field, "must be a string, got " + n);
    }
    return n.asText();
  }

  List<String> stringList(String field) {
    List<String> out = new ArrayList<>();
    if (!has(field)) {
      return out;
    }
    JsonNode n = root.get(field);
    if (!n.isArray()) {
      throw error(field, "must be a list of strings");
    }
    n.forEach(x -> out.add(x.asText()));
    return out;
  }

  /** An int or a list of ints (eos_token_id takes both forms). */
  List<Integer> intOrIntList(String field) {
    List<Integer> out = new ArrayList<>();
    if (!has(field)) {
      return out;
    }
    JsonNode n = root.get(field);
    if (n.isIntegralNumber()) {
      out.add(n.asInt());
    } else if (n.isArray()) {
      for (JsonNode x : n) {
        if (!x.isIntegralNumber()) {
          throw error(field, "must be an integer or a list of integers");
        }
        out.add(x.asInt());
      }
    } else {
      throw error(field, "must be an integer or a list of integers");
    }
    return out;
  }

  List<Integer> intList(String field) {
    return intOrIntList(field);
  }
}
