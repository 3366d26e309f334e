package dev.scorch.engine.config;

/** A config file that Scorch cannot run: the message names the file and the field. */
public final class ConfigException extends RuntimeException {
    public ConfigException(String message) {
        super(message);
    }

    public ConfigException(String message, Throwable cause) {
        super(message, cause);
    }
}
