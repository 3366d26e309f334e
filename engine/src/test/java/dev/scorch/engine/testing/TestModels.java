package dev.scorch.engine.testing;

import java.net.URISyntaxException;
import java.nio.file.Path;

/** Paths of the models and data tests use. */
public final class TestModels {
    private TestModels() {}

    public static Path resource(String name) {
        try {
            var url = TestModels.class.getClassLoader().getResource(name);
            if (url == null) {
                throw new IllegalStateException("test resource " + name + " is missing");
            }
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The conformance checkpoint copied from shared/conformance/tiny-k2-bf16. */
    public static Path conformanceModel() {
        return resource("conformance/tiny-k2-bf16/model");
    }

    public static Path conformanceGolden() {
        return resource("conformance/tiny-k2-bf16/golden.json");
    }
}
