package dev.scorch.jobs.lmeval.task;

import java.nio.file.Path;

/**
 * A {@code !function module.fn} value from an lm-eval YAML file: a Python function lm-eval would import from
 * {@code module.py} beside {@code file}. Scorch runs no Python, so a task that would call one is refused; the
 * reference is kept so that the refusal can name it.
 */
public record FunctionRef(String name, Path file) {
    @Override
    public String toString() {
        return "!function " + name;
    }
}
