package dev.scorch.engine.config;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import java.io.IOException;

/**
 * A JSON file's read or parse error in words that never quote the file's content: Jackson's messages echo the token it
 * stumbled on and a snippet of the source, which for a file linked or swapped in from elsewhere could be anything.
 */
public final class JsonErrors {
    private JsonErrors() {}

    /** "not valid JSON (line L, column C)", a duplicate key named, or the I/O error's message. */
    public static String describe(IOException e) {
        if (!(e instanceof JsonProcessingException j)) {
            return "cannot read: " + e.getMessage();
        }
        String m = j.getOriginalMessage();
        if (m != null && m.startsWith("Duplicate field ")) { // Jackson: Duplicate field 'NAME'
            return "names " + m.substring("Duplicate field ".length()) + " twice, which is ambiguous";
        }
        JsonLocation at = j.getLocation();
        return at == null || at.getLineNr() < 0
                ? "not valid JSON"
                : "not valid JSON (line " + at.getLineNr() + ", column " + at.getColumnNr() + ")";
    }
}
