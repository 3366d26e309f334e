package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.config.ModelConfig;
import java.io.DataInputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The checked-in tiny Kimi-K2-layout conformance model loads, validates, and its parameter count is right. */
class ConformanceModelTest {

    static Path modelDir() throws Exception {
        return Path.of(ConformanceModelTest.class
                        .getResource("/conformance/tiny-k2-bf16/model/config.json")
                        .toURI())
                .getParent();
    }

    /** Sum of numel over every shard header, read here without SafetensorsFile; inv_freq buffers skipped. */
    private static long[] countFromHeaders(Path dir) throws Exception {
        long params = 0;
        long tensors = 0;
        ObjectMapper json = new ObjectMapper();
        List<Path> shards;
        try (Stream<Path> s = Files.list(dir)) {
            shards = s.filter(p -> p.toString().endsWith(".safetensors"))
                    .sorted()
                    .toList();
        }
        for (Path shard : shards) {
            try (InputStream in = Files.newInputStream(shard)) {
                DataInputStream d = new DataInputStream(in);
                byte[] len = new byte[8];
                d.readFully(len);
                byte[] header = new byte
                        [(int) ByteBuffer.wrap(len)
                                .order(ByteOrder.LITTLE_ENDIAN)
                                .getLong()];
                d.readFully(header);
                Iterator<Map.Entry<String, JsonNode>> it = json.readTree(header).fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> e = it.next();
                    if (e.getKey().equals("__metadata__")) {
                        continue;
                    }
                    tensors++;
                    if (e.getKey().endsWith(".rotary_emb.inv_freq")) {
                        continue;
                    }
                    long n = 1;
                    for (JsonNode dim : e.getValue().get("shape")) {
                        n *= dim.asLong();
                    }
                    params += n;
                }
            }
        }
        return new long[] {params, tensors};
    }

    @Test
    void loadsValidatesAndCounts() throws Exception {
        Path dir = modelDir();
        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        Checkpoint ckpt = Checkpoint.open(dir);
        assertEquals(2, ckpt.shards().size());

        ValidationReport r = CheckpointValidator.validate(config, ckpt);
        assertTrue(r.valid(), r.errors().toString());
        assertEquals(List.of(), r.unexpected());
        assertEquals(3, r.ignored().size(), r.ignored().toString());
        assertTrue(
                r.ignored().stream().allMatch(n -> n.endsWith(".self_attn.rotary_emb.inv_freq")),
                r.ignored().toString());

        long[] fromHeaders = countFromHeaders(dir);
        List<String> names = new ArrayList<>();
        ckpt.names().forEach(names::add);
        assertEquals(fromHeaders[1], names.size());
        assertEquals(94, names.size());
        assertEquals(fromHeaders[0], WeightLayout.parameters(config));
        // By hand: embed + lm_head 2*512*64 = 65536, final norm 64, 3 MLA blocks of 12976, one dense MLP 3*64*192 =
        // 36864,
        // two MoE layers of 8*64 + 8 (router) + 9 experts (8 routed + 1 shared) * 3*64*32 = 55816.
        assertEquals(65536 + 64 + 3 * 12976 + 36864 + 2 * 55816, fromHeaders[0]);
        assertEquals(253_024L, WeightLayout.parameters(config));
        // Active: everything but 6 of the 8 routed experts in each MoE layer.
        assertEquals(253_024L - 2 * 6 * 3 * 64 * 32, WeightLayout.activeParameters(config));
    }

    @Test
    void tensorsDecode() throws Exception {
        Checkpoint ckpt = Checkpoint.open(modelDir());
        Tensor emb = ckpt.tensor("model.embed_tokens.weight");
        assertEquals(DType.BF16, emb.dtype());
        float[] v = emb.toFloatArray();
        assertEquals(512 * 64, v.length);
        for (float x : v) {
            assertTrue(Float.isFinite(x));
        }
        // rotary inv_freq of a rope head dim of 8: 1 / theta^(2i/8) for i = 0..3 (theta 50000), rounded to BF16.
        float[] inv =
                ckpt.tensor("model.layers.0.self_attn.rotary_emb.inv_freq").toFloatArray();
        assertEquals(4, inv.length);
        assertEquals(1f, inv[0]);
        for (int i = 1; i < 4; i++) {
            assertEquals(1 / Math.pow(50000, 2.0 * i / 8), inv[i], inv[i] / 128);
        }
    }
}
